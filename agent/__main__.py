"""`python -m agent`: the same as the `nodeqos-agent` command."""

from agent.cli import main

main()
