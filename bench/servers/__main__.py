"""`python -m bench.servers`."""

from bench.servers import main

main()
