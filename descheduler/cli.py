"""The `nodeqos-descheduler` command line.

    nodeqos-descheduler --config descheduler.yaml                  # the daemon
    nodeqos-descheduler --config c.yaml --once --dry-run           # one cycle, then exit
    nodeqos-descheduler --config c.yaml --validate                 # check the file, exit
    nodeqos-descheduler --config c.yaml --write-config-to -        # print the defaulted config
    nodeqos-descheduler simulate --config c.yaml --snapshot s.yaml # explain one cycle

Exit status: 0 done (or stopped by SIGTERM/SIGINT); 1 `--once` could not sync
its caches (API server unreachable); 2 the configuration, the plugins, the
credentials or the snapshot file are unusable (every problem is listed on
stderr).

The plugins are the in-tree ones plus every installed package's entry points
in group `nodeqos.descheduler.plugins` (`descheduler.plugins.registry()`);
`run(argv, plugins=[...])` adds plugin objects for an image that composes its
own descheduler in Python (koord-descheduler's `NewDeschedulerCommand(WithPlugin(...))`).
"""

from __future__ import annotations

import json
import logging
import pathlib
import signal
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NoReturn

import click
import yaml
from prometheus_client import CollectorRegistry

from descheduler import app, config, features, framework
from descheduler import plugins as _plugins  # `plugins` is run()'s keyword
from descheduler.app import daemon, render, server, simulate, snapshotfile

EXIT_CONFIG = 2  # same status click uses for usage errors


@dataclass(slots=True)
class Session:
    """What the group hands its subcommand: the plugins, and the configuration if one was given."""

    registry: framework.Registry
    config: config.DeschedulerConfiguration | None = None


def run(argv: Sequence[str] | None = None, *, plugins: Iterable[object] = ()) -> None:
    """Run `nodeqos-descheduler` with `argv` (default: sys.argv) and extra `plugins`; exits.

    Each of `plugins` exports the plugin surface (`NAME`, `Args`,
    `EXTENSION_POINTS`, `factory`; usually it is the plugin's module) and joins
    the in-tree and installed plugins, as if installed:

        import recentrestarts
        from descheduler import cli
        cli.run(plugins=[recentrestarts])
    """
    registry = _plugins.registry(plugins)
    main.main(args=argv, prog_name="nodeqos-descheduler", obj=Session(registry))


def _session(ctx: click.Context) -> Session:
    """The session `run` passed in, else one over the in-tree and installed plugins."""
    root = ctx.find_root()
    if not isinstance(root.obj, Session):
        root.obj = Session(_plugins.registry())
    return root.obj


def _load(
    path: pathlib.Path | None, registry: framework.Registry
) -> config.DeschedulerConfiguration:
    if path is None:
        return config.default_configuration(plugins=registry.catalog())
    return config.load_config(path, plugins=registry.catalog())


def _warn_broken(cfg: config.DeschedulerConfiguration, registry: framework.Registry) -> None:
    """Say at once which profiles a broken plugin will keep from running."""
    broken = registry.broken()
    for profile in cfg.profiles:
        for name in dict.fromkeys(
            n for point in config.ExtensionPoint for n in profile.enabled(point)
        ):
            if name in broken:
                click.echo(
                    f"warning: profile {profile.name} will not run: plugin {name} is broken:"
                    f" {broken[name]}",
                    err=True,
                )


def _report(error: config.ConfigError) -> None:
    count = len(error.errors)
    click.echo(f"invalid configuration ({count} problem{'s' if count != 1 else ''}):", err=True)
    for problem in error.errors:
        click.echo(f"  {problem}", err=True)


def _fail(ctx: click.Context, title: str, problems: list[str]) -> NoReturn:
    count = len(problems)
    click.echo(f"{title} ({count} problem{'s' if count != 1 else ''}):", err=True)
    for problem in problems:
        click.echo(f"  {problem}", err=True)
    ctx.exit(EXIT_CONFIG)


def _logging(verbose: int, quiet_default: bool = False) -> None:
    quiet = logging.WARNING if quiet_default else logging.INFO
    level = logging.DEBUG if verbose else quiet
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def _config_option(help_text: str) -> Callable[[Callable[..., object]], Callable[..., object]]:
    """`--config FILE` (into `config_file`), on the daemon command and on `simulate`."""
    return click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False, path_type=pathlib.Path),
        help=help_text,
    )


@click.group(
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@_config_option(
    "DeschedulerConfiguration YAML (Koordinator or kubernetes-sigs/descheduler v1alpha2)."
)
@click.option(
    "--write-config-to",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=pathlib.Path),
    help="Write the fully defaulted configuration as YAML to this file ('-' for stdout) and exit.",
)
@click.option("--validate", is_flag=True, help="Check the configuration file and exit.")
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False),
    help="Kubeconfig file (default: clientConnection.kubeconfig, else in-cluster).",
)
@click.option("--dry-run", is_flag=True, help="Decide, log and count, but evict nothing.")
@click.option("--once", is_flag=True, help="Run one cycle, print its evictions and exit.")
@click.option(
    "--eviction-backend",
    type=click.Choice(daemon.BACKENDS),
    default="eviction",
    show_default=True,
    help="eviction: the Eviction API (PodDisruptionBudgets hold); delete: delete pods (opt-in).",
)
@click.option(
    "--metrics-addr",
    metavar="HOST:PORT",
    help="Serve /metrics and /healthz here (default: metricsBindAddress/healthzBindAddress "
    f"when the file sets them, else {server.DEFAULT_ADDRESS}; --once serves only when given).",
)
@click.option(
    "--leader-elect/--no-leader-elect",
    default=None,
    help="Override leaderElection.leaderElect (--once does not campaign unless told to).",
)
@click.option(
    "--feature-gates",
    default="",
    metavar="Name=true|false,...",
    callback=lambda _ctx, param, value: _gates(param, value),
    help="kubernetes-sigs/descheduler's gates: "
    + ", ".join(
        f"{f.name}=true|false ({f.stage}, default {str(f.default).lower()})"
        for f in features.FEATURES
    )
    + ".",
)
@click.option("-v", "--verbose", count=True, help="Log debug messages.")
@click.pass_context
def main(
    ctx: click.Context,
    config_file: pathlib.Path | None,
    write_config_to: pathlib.Path | None,
    validate: bool,
    kubeconfig: str | None,
    dry_run: bool,
    once: bool,
    eviction_backend: str,
    metrics_addr: str | None,
    leader_elect: bool | None,
    feature_gates: features.Gates,
    verbose: int,
) -> None:
    """Run the nodeqos descheduler (koord-descheduler compatible)."""
    session = _session(ctx)
    try:
        loaded = _load(config_file, session.registry)
    except config.ConfigError as error:
        _report(error)
        ctx.exit(EXIT_CONFIG)
    session.config = loaded if config_file is not None else None
    _warn_broken(loaded, session.registry)
    if write_config_to is not None:
        _write_config(loaded, write_config_to)
        ctx.exit(0)
    if ctx.invoked_subcommand is not None:
        return
    if validate:
        click.echo("configuration OK")
        ctx.exit(0)
    if config_file is None:
        raise click.UsageError("--config is required to run the descheduler")
    _logging(verbose)
    options = app.Options(
        kubeconfig=kubeconfig,
        dry_run=dry_run,
        once=once,
        backend=eviction_backend,
        metrics_addr=metrics_addr,
        leader_elect=leader_elect,
        gates=feature_gates,
    )
    try:
        running = app.build(
            loaded,
            options,
            CollectorRegistry(),
            session.registry,
            addresses=listen_addresses(config_file, loaded, options),
        )
    except app.StartupError as err:
        _fail(ctx, "cannot start", err.problems)
    try:
        status = _serve(running, print_report if once else None)
    except app.StartupError as err:
        _fail(ctx, "cannot start", err.problems)
    ctx.exit(status)


def _write_config(loaded: config.DeschedulerConfiguration, target: pathlib.Path) -> None:
    """--write-config-to: the configuration with every default filled in ("-": stdout)."""
    text = config.dump_config(loaded)
    if str(target) == "-":
        click.echo(text, nl=False)
        return
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as err:
        raise click.FileError(str(target), str(err)) from err


def _gates(param: click.Parameter, value: str) -> features.Gates:
    try:
        return features.Gates.parse(value or "")
    except ValueError as err:
        raise click.BadParameter(str(err), param=param) from err


def listen_addresses(
    path: pathlib.Path, cfg: config.DeschedulerConfiguration, options: app.Options
) -> list[str]:
    """--metrics-addr, else the bind addresses the file sets, else the default (daemon only).

    The configuration always holds Koordinator's defaults (0.0.0.0:10251), so
    whether the file set them is read from the file itself.
    """
    if options.metrics_addr is not None:
        return [options.metrics_addr]
    if options.once:
        return []
    written = yaml.safe_load(path.read_text(encoding="utf-8"))  # loaded fine already
    keys = written if isinstance(written, dict) else {}
    found = [
        value
        for key, value in (
            ("metricsBindAddress", cfg.metrics_bind_address),
            ("healthzBindAddress", cfg.healthz_bind_address),
        )
        if keys.get(key) is not None
    ]
    return list(dict.fromkeys(found)) or [server.DEFAULT_ADDRESS]


def _serve(running: app.Daemon, on_report: Callable[[framework.CycleReport], None] | None) -> int:
    previous = {
        signum: signal.signal(signum, lambda _sig, _frame: running.stop())
        for signum in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        return running.run(on_report)
    finally:
        for signum, handler in previous.items():  # main may run in-process (tests)
            signal.signal(signum, handler)


def print_report(report: framework.CycleReport) -> None:
    """--once: a line per eviction, then a summary line."""
    verb = "would evict" if report.dry_run else "evicted"
    for e in report.evictions:
        profile = f", profile {e.profile}" if e.profile else ""
        click.echo(f"{verb} {e.pod} from node {e.node} ({e.plugin}{profile}): {e.reason}")
    notes = "; ".join(f"{n.reason.value}: {n.detail}" for n in report.notes)
    click.echo(
        f"cycle done{' (dry run)' if report.dry_run else ''}: {len(report.evictions)} evicted, "
        f"{len(report.skipped)} passed over, {len(report.failures)} plugin errors"
        + (f"; {notes}" if notes else "")
    )


def _now(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime:
    if value is None:
        return datetime.now(UTC)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"not an RFC 3339 time: {value!r}") from None
    if parsed.tzinfo is None:
        raise click.BadParameter(f"needs a time zone (e.g. {value}Z): {value!r}")
    return parsed.astimezone(UTC)


@main.command("simulate")
@_config_option("DeschedulerConfiguration YAML (else the one given before 'simulate').")
@click.option(
    "--snapshot",
    required=True,
    type=click.Path(dir_okay=False, path_type=pathlib.Path),
    help="Nodes, Pods, NodeMetrics, PodDisruptionBudgets as `kubectl get -o yaml` prints them.",
)
@click.option(
    "--now",
    callback=_now,
    metavar="RFC3339",
    help="Pin the clock (NodeMetric freshness, pod age), e.g. 2024-05-01T12:00:00Z.",
)
@click.option(
    "--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option("-v", "--verbose", count=True, help="Log debug messages.")
@click.pass_context
def simulate_command(
    ctx: click.Context,
    config_file: pathlib.Path | None,
    snapshot: pathlib.Path,
    now: datetime,
    output: str,
    verbose: int,
) -> None:
    """Explain one descheduling cycle over a snapshot file; evicts nothing."""
    _logging(verbose, quiet_default=True)
    session = _session(ctx)
    cfg = session.config
    if config_file is not None:
        try:
            cfg = config.load_config(config_file, plugins=session.registry.catalog())
        except config.ConfigError as error:
            _report(error)
            ctx.exit(EXIT_CONFIG)
    if cfg is None:
        raise click.UsageError("simulate needs --config")
    try:
        loaded = snapshotfile.load(snapshot)
    except snapshotfile.SnapshotError as err:
        _fail(ctx, "unusable snapshot", err.problems)
    try:
        result = simulate.run(cfg, loaded.source, session.registry, now=now)
    except framework.StartupError as err:
        _fail(ctx, "cannot start", err.problems)
    if output == "json":
        body = result.to_dict()
        body["skippedKinds"] = dict(loaded.skipped_kinds)
        click.echo(json.dumps(body, indent=2))
    else:
        click.echo(render.table(result), nl=False)


if __name__ == "__main__":
    main()
