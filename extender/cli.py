"""The `nodeqos-scheduler-extender` command line.

    nodeqos-scheduler-extender --config loadaware.yaml            # serve kube-scheduler
    nodeqos-scheduler-extender --config loadaware.yaml --validate # check the file, exit
    nodeqos-scheduler-extender --write-config-to -                # print the defaulted args

Exit status: 0 stopped by SIGTERM/SIGINT (or --validate passed); 2 the config
file or the credentials are unusable (every problem is listed on stderr).

Stateless: no leader election; run two replicas behind the Service. Ready
(`/healthz` 200) once the Node, Pod and NodeMetric caches have synced.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import signal
import sys
import threading
from datetime import timedelta
from typing import Any

import click
import yaml
from prometheus_client import CollectorRegistry

from extender import args as argsmod
from extender import server, view
from kube import quantity, rest

EXIT_CONFIG = 2
SWITCH_INTERVAL = 0.0005  # seconds; see serve()


def _parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise click.BadParameter(f"must be HOST:PORT or :PORT (got {text!r})")
    return host.strip("[]") or "0.0.0.0", int(port)


def _wire(value: Any) -> Any:
    if isinstance(value, timedelta):
        return quantity.format_go_duration(value)
    if isinstance(value, tuple):
        return list(value)
    if hasattr(value, "items"):
        return dict(value.items())
    return value


def dump_args(args: argsmod.LoadAwareArgs) -> dict[str, Any]:
    """The defaulted args under their wire names."""
    wire_of = {attr: wire for wire, (attr, _) in argsmod._FIELDS.items()}
    agg_wire = {attr: wire for wire, (attr, _) in argsmod._AGGREGATED_FIELDS.items()}
    out: dict[str, Any] = {"apiVersion": argsmod.API_VERSIONS[0], "kind": argsmod.KIND}
    for f in dataclasses.fields(args):
        value = getattr(args, f.name)
        if value is None:
            continue
        if isinstance(value, argsmod.AggregatedArgs):
            out[wire_of[f.name]] = {
                agg_wire[g.name]: _wire(getattr(value, g.name)) for g in dataclasses.fields(value)
            }
        else:
            out[wire_of[f.name]] = _wire(value)
    return out


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=pathlib.Path),
    help="LoadAwareSchedulingArgs YAML (Koordinator's names); defaults when omitted.",
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
    help="Write the defaulted args as YAML ('-' for stdout) and exit.",
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
    """Koordinator's LoadAwareScheduling as a kube-scheduler extender."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    ctx = click.get_current_context()
    try:
        args = argsmod.load_args(config_file) if config_file else argsmod.decode_args({})
        address = _parse_address(bind_address)
    except argsmod.ArgsError as err:
        count = len(err.problems)
        click.echo(f"invalid configuration ({count} problem{'s' if count != 1 else ''}):", err=True)
        for problem in err.problems:
            click.echo(f"  {problem}", err=True)
        ctx.exit(EXIT_CONFIG)
    except click.BadParameter as err:
        click.echo(f"--bind-address: {err.message}", err=True)
        ctx.exit(EXIT_CONFIG)
    if validate:
        click.echo("configuration is valid")
        return
    if write_config_to is not None:
        text = yaml.safe_dump(dump_args(args), sort_keys=False)
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
    serve(client, args, address)


def serve(client: rest.Rest, args: argsmod.LoadAwareArgs, address: tuple[str, int]) -> None:
    """Run until SIGTERM/SIGINT."""
    log = logging.getLogger("extender")
    # kube-scheduler waits on every verb while the informer threads decode watch
    # events; a handler thread should not queue for the GIL for the default 5 ms.
    sys.setswitchinterval(SWITCH_INTERVAL)
    cluster = view.ClusterView(args)
    caches = view.informers(client, cluster)

    def readiness() -> dict[str, object]:
        synced = {c.name: c.synced for c in caches}
        return {"ready": all(synced.values()), "caches": synced}

    registry = CollectorRegistry()
    http = server.HttpServer(address, cluster, registry, readiness)
    for informer in caches:
        informer.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    log.info("serving filter and prioritize on %s:%d", *http.address)
    stop.wait()
    log.info("stopping")
    http.close()
    for informer in caches:
        informer.stop()


if __name__ == "__main__":
    main()
