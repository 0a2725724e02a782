"""The nodeqos descheduler: config API, framework, plugins, evictor, CLI.

`run(argv, plugins=[...])` is the descheduler command with extra plugins, for
an image that composes its own descheduler in Python; installed packages
declaring entry points in group `nodeqos.descheduler.plugins` need no code at
all (docs/plugins.md).
"""

from collections.abc import Iterable, Sequence


def run(argv: Sequence[str] | None = None, *, plugins: Iterable[object] = ()) -> None:
    """`nodeqos-descheduler` with `argv` (default: sys.argv) and extra `plugins`; exits.

    See `descheduler.cli.run`.
    """
    # Imported here: `import descheduler.config` must not pull in the CLI and every plugin.
    from descheduler import cli

    cli.run(argv, plugins=plugins)


__all__ = ["run"]
