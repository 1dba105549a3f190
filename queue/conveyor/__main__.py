"""python -m conveyor: the conveyor command."""

import sys

from ._cli import main

sys.exit(main())
