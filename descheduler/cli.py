"""The `nodeqos-descheduler` command line (placeholder until the framework issue)."""

import click


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Run the nodeqos descheduler."""
    raise click.UsageError("the descheduler is not implemented yet")
