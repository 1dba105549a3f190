"""``python -m bench.compare``."""

from bench.compare.cli import main

raise SystemExit(main())
