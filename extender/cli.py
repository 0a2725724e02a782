"""The `nodeqos-scheduler-extender` command line.

    nodeqos-scheduler-extender --config loadaware.yaml            # serve kube-scheduler
    nodeqos-scheduler-extender --config profile.yaml              # a profile of scheduler plugins
    nodeqos-scheduler-extender --config loadaware.yaml --validate # check the file, exit
    nodeqos-scheduler-extender --write-config-to -                # print the defaulted args

Exit status: 0 stopped by SIGTERM/SIGINT (or --validate passed); 2 the config
file or the credentials are unusable (every problem is listed on stderr).

Stateless: no leader election; run two replicas behind the Service. Ready
(`/healthz` 200) once the Node, Pod and NodeMetric caches have synced.
"""

from __future__ import annotations

import logging
import pathlib
import signal
import sys
import threading
import time
from typing import Any

import click
import yaml
from prometheus_client import CollectorRegistry

from extender import args as argsmod
from extender import framework, plugins, server
from extender.framework import config
from kube import rest, serverversion

EXIT_CONFIG = 2
SWITCH_INTERVAL = 0.0005  # seconds; see serve()


def _parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise click.BadParameter(f"must be HOST:PORT or :PORT (got {text!r})")
    return host.strip("[]") or "0.0.0.0", int(port)


def dump_config(profile: framework.Profile) -> dict[str, Any]:
    """A profile as a config file: LoadAwareScheduling's args defaulted, others as decoded."""
    if profile.legacy:
        return profile.args[config.LEGACY_PLUGIN].to_mapping()  # type: ignore[attr-defined,no-any-return]
    plugin_config = []
    for name, args in profile.args.items():
        to_mapping = getattr(args, "to_mapping", None)
        wire = to_mapping() if callable(to_mapping) else {}
        if isinstance(args, argsmod.LoadAwareArgs):
            wire.pop("apiVersion"), wire.pop("kind")
        plugin_config.append({"name": name, "args": wire})
    plugins: dict[str, Any] = {}
    if profile.filter:
        plugins["filter"] = {
            "enabled": [
                {"name": e.name, **({"required": True} if e.required else {})}
                for e in profile.filter
            ]
        }
    if profile.score:
        plugins["score"] = {
            "enabled": [{"name": e.name, "weight": e.weight} for e in profile.score]
        }
    body: dict[str, Any] = {"plugins": plugins, "pluginConfig": plugin_config}
    if profile.name:
        body = {"name": profile.name, **body}
    return {"apiVersion": config.API_VERSION, "kind": config.KIND, "profiles": [body]}


def _report(ctx: click.Context, problems: list[str]) -> None:
    count = len(problems)
    click.echo(f"invalid configuration ({count} problem{'s' if count != 1 else ''}):", err=True)
    for problem in problems:
        click.echo(f"  {problem}", err=True)
    ctx.exit(EXIT_CONFIG)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=pathlib.Path),
    help="A SchedulerExtenderConfiguration (a profile of scheduler plugins), or LoadAwareSchedulingArgs "
    "YAML (Koordinator's names) for LoadAwareScheduling alone; defaults when omitted.",
)
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=pathlib.Path),
    help="Credentials; in-cluster ServiceAccount when omitted.",
)
@click.option(
    "--bind-address",
    default="0.0.0.0:10262",
    show_default=True,
    help="Where kube-scheduler calls /filter and /prioritize; /metrics and /healthz too.",
)
@click.option("--validate", is_flag=True, help="Check the config file and exit.")
@click.option(
    "--write-config-to",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=pathlib.Path),
    help="Write the defaulted configuration as YAML ('-' for stdout) and exit.",
)
@click.option("-v", "--verbose", count=True, help="Log each refusal (debug).")
def main(
    config_file: pathlib.Path | None,
    kubeconfig: pathlib.Path | None,
    bind_address: str,
    validate: bool,
    write_config_to: pathlib.Path | None,
    verbose: int,
) -> None:
    """Scheduler plugins (Koordinator's LoadAwareScheduling and any installed) as a kube-scheduler extender."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    ctx = click.get_current_context()
    registry = plugins.registry()
    try:
        profile = (
            config.load_config(config_file, registry)
            if config_file
            else config.decode_config({}, registry)
        )
        address = _parse_address(bind_address)
    except argsmod.ArgsError as err:
        _report(ctx, err.problems)
    except click.BadParameter as err:
        click.echo(f"--bind-address: {err.message}", err=True)
        ctx.exit(EXIT_CONFIG)
    if validate:
        click.echo("configuration is valid")
        return
    if write_config_to is not None:
        text = yaml.safe_dump(dump_config(profile), sort_keys=False)
        if str(write_config_to) == "-":
            click.echo(text, nl=False)
        else:
            write_config_to.write_text(text)
        return
    try:
        client = rest.Rest.from_kubeconfig(kubeconfig)
    except Exception as err:  # the kubernetes package raises several unrelated types here
        click.echo(f"credentials: {err}", err=True)
        ctx.exit(EXIT_CONFIG)
    try:
        serverversion.check(client, "nodeqos-scheduler-extender")
    except serverversion.UnsupportedServer as err:
        click.echo(f"cannot start: {err}", err=True)
        ctx.exit(EXIT_CONFIG)
    metrics = CollectorRegistry()
    watches = framework.Watches()
    handle = framework.Handle(watches.subscribe, clock=time.time, registry=metrics)
    try:
        built = framework.build(profile, registry, handle)
    except argsmod.ArgsError as err:
        _report(ctx, err.problems)
    serve(client, built, watches, metrics, address)


def serve(
    client: rest.Rest,
    built: framework.Framework,
    watches: framework.Watches,
    metrics: CollectorRegistry,
    address: tuple[str, int],
) -> None:
    """Run until SIGTERM/SIGINT."""
    log = logging.getLogger("extender")
    # kube-scheduler waits on every verb while the informer threads decode watch
    # events; a handler thread should not queue for the GIL for the default 5 ms.
    sys.setswitchinterval(SWITCH_INTERVAL)
    caches = watches.informers(client)

    def readiness() -> dict[str, object]:
        synced = {c.name: c.synced for c in caches}
        return {"ready": all(synced.values()), "caches": synced}

    http = server.HttpServer(address, built, metrics, readiness)
    for informer in caches:
        informer.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    names = ", ".join(s.name for s in (*built.filters, *built.scores))
    log.info("serving filter and prioritize on %s:%d (plugins: %s)", *http.address, names)
    stop.wait()
    log.info("stopping")
    http.close()
    for informer in caches:
        informer.stop()


if __name__ == "__main__":
    main()
