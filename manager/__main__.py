"""`python -m manager`: the same as the `nodeqos-manager` command."""

from manager.cli import main

main()
