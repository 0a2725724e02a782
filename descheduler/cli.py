"""The `nodeqos-descheduler` command line.

    nodeqos-descheduler --config descheduler.yaml             # validate (the runner comes later)
    nodeqos-descheduler --config c.yaml --write-config-to -   # print the fully defaulted config
    nodeqos-descheduler --config c.yaml simulate ...          # subcommands (later) get the config

A configuration problem exits with status 2 after listing every problem on stderr.
"""

from __future__ import annotations

import pathlib

import click

from descheduler import config

EXIT_CONFIG = 2  # same status click uses for usage errors


def _load(path: pathlib.Path | None) -> config.DeschedulerConfiguration:
    if path is None:
        return config.default_configuration()
    return config.load_config(path)


def _report(error: config.ConfigError) -> None:
    count = len(error.errors)
    click.echo(f"invalid configuration ({count} problem{'s' if count != 1 else ''}):", err=True)
    for problem in error.errors:
        click.echo(f"  {problem}", err=True)


@click.group(
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=pathlib.Path),
    help="DeschedulerConfiguration YAML (Koordinator or kubernetes-sigs/descheduler v1alpha2).",
)
@click.option(
    "--write-config-to",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=pathlib.Path),
    help="Write the fully defaulted configuration as YAML to this file ('-' for stdout) and exit.",
)
@click.pass_context
def main(
    ctx: click.Context, config_file: pathlib.Path | None, write_config_to: pathlib.Path | None
) -> None:
    """Run the nodeqos descheduler."""
    try:
        loaded = _load(config_file)
    except config.ConfigError as error:
        _report(error)
        ctx.exit(EXIT_CONFIG)
    ctx.obj = loaded
    if write_config_to is not None:
        text = config.dump_config(loaded)
        if str(write_config_to) == "-":
            click.echo(text, nl=False)
        else:
            try:
                write_config_to.write_text(text, encoding="utf-8")
            except OSError as err:
                raise click.FileError(str(write_config_to), str(err)) from err
        ctx.exit(0)
    if ctx.invoked_subcommand is None:
        click.echo("configuration OK")


if __name__ == "__main__":
    main()
