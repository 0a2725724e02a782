"""The `nodeqos-agent` command line (placeholder until the agent-collection issue)."""

import click


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Run the nodeqos node agent."""
    raise click.UsageError("the agent is not implemented yet")
