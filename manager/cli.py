"""The `nodeqos-manager` command line.

    nodeqos-manager                                   # the daemon (in-cluster credentials)
    nodeqos-manager --kubeconfig k --no-leader-elect  # one replica, from outside
    nodeqos-manager render --config cm.yaml --node-labels a=b   # print a node's NodeSLO spec

Exit status: 0 stopped by SIGTERM/SIGINT; 2 the flags or credentials are
unusable, or `render` found problems in the ConfigMap (every problem is listed
on stderr with its flag or field path).
"""

from __future__ import annotations

import json
import logging
import pathlib
import signal
import sys
from typing import NoReturn

import click
import yaml
from prometheus_client import CollectorRegistry

from manager import daemon, render, sloconfig

EXIT_CONFIG = 2


def _fail(ctx: click.Context, title: str, problems: list[str]) -> NoReturn:
    count = len(problems)
    click.echo(f"{title} ({count} problem{'s' if count != 1 else ''}):", err=True)
    for problem in problems:
        click.echo(f"  {problem}", err=True)
    ctx.exit(EXIT_CONFIG)


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--kubeconfig", type=click.Path(dir_okay=False), help="Kubeconfig (default: in-cluster)."
)
@click.option(
    "--config-namespace",
    default=sloconfig.CONFIGMAP_NAMESPACE,
    show_default=True,
    help="Namespace of the slo-controller ConfigMap (Koordinator's --config-namespace).",
)
@click.option(
    "--slo-config-name",
    "config_name",
    default=sloconfig.CONFIGMAP_NAME,
    show_default=True,
    help="Name of the ConfigMap (Koordinator's --slo-config-name).",
)
@click.option(
    "--metrics-addr", default=daemon.DEFAULT_ADDRESS, show_default=True, metavar="HOST:PORT"
)
@click.option("--leader-elect/--no-leader-elect", default=True, show_default=True)
@click.option("--lease-namespace", default="nodeqos-system", show_default=True)
@click.option("--lease-name", default="nodeqos-manager", show_default=True)
@click.option("--lease-duration", type=float, default=15.0, show_default=True, metavar="SECONDS")
@click.option("--renew-deadline", type=float, default=10.0, show_default=True, metavar="SECONDS")
@click.option("--retry-period", type=float, default=2.0, show_default=True, metavar="SECONDS")
@click.option(
    "--resync-seconds",
    type=float,
    default=300.0,
    show_default=True,
    help="A full pass at least this often, besides the one every change triggers.",
)
@click.option(
    "--manage-nodemetrics/--no-manage-nodemetrics",
    default=True,
    show_default=True,
    help="Create NodeMetrics and keep their spec.metricCollectPolicy from colocation-config.",
)
@click.option(
    "--node-selector",
    default=None,
    metavar="SELECTOR",
    help="Manage only the nodes this label selector picks (e.g. 'pool in (a,b)'); default all.",
)
@click.option(
    "--webhook-addr",
    default="",
    metavar="HOST:PORT",
    help="Serve the probability webhook (profiles with probability 1-99%) here; empty: off.",
)
@click.option(
    "--webhook-service",
    default="nodeqos-system/nodeqos-manager:443",
    show_default=True,
    metavar="NAMESPACE/NAME:PORT",
    help="The Service through which the API server reaches the webhook.",
)
@click.option(
    "--webhook-url",
    default="",
    metavar="URL",
    help="Reach the webhook at this https URL instead of the Service (out-of-cluster).",
)
@click.option(
    "--profile-path",
    type=click.Choice(["auto", "policy", "webhook"]),
    default="auto",
    show_default=True,
    help="How ClusterColocationProfiles are applied: MutatingAdmissionPolicy (policy), the"
    " manager's webhook (webhook, needs --webhook-addr), or policy where the API server serves"
    " MutatingAdmissionPolicy v1 and webhook elsewhere (auto).",
)
@click.option("--kube-api-qps", "qps", type=float, default=100.0, show_default=True)
@click.option("--kube-api-burst", "burst", type=int, default=200, show_default=True)
@click.option("-v", "--verbose", count=True, help="Log debug messages.")
@click.pass_context
def main(ctx: click.Context, /, verbose: int, **flags: object) -> None:
    """Render one NodeSLO per node from Koordinator's slo-controller-config."""
    if ctx.invoked_subcommand is not None:
        return
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    options = daemon.Options(**flags)  # type: ignore[arg-type]
    try:
        running = daemon.build(options, CollectorRegistry())
    except daemon.StartupError as err:
        _fail(ctx, "cannot start", err.problems)
    previous = {
        signum: signal.signal(signum, lambda _sig, _frame: running.stop())
        for signum in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        status = running.run()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    ctx.exit(status)


def _labels(text: str) -> dict[str, str]:
    found = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise click.BadParameter(f"{part!r}: must be KEY=VALUE")
        found[key] = value
    return found


@main.command("render")
@click.option(
    "--config",
    "config_file",
    required=True,
    type=click.Path(dir_okay=False, exists=True, path_type=pathlib.Path),
    help="A ConfigMap manifest (YAML) holding slo-controller-config.",
)
@click.option("--node-labels", default="", help="The node's labels, KEY=VALUE,...")
@click.pass_context
def render_command(ctx: click.Context, config_file: pathlib.Path, node_labels: str) -> None:
    """Print the NodeSLO spec and NodeMetric spec a node with these labels gets."""
    try:
        doc = yaml.safe_load(config_file.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        _fail(ctx, "invalid ConfigMap", [f"{config_file}: {err}"])
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, dict):
        _fail(ctx, "invalid ConfigMap", [f"{config_file}: data: must be a mapping of keys"])
    loaded = sloconfig.load(data)
    for warning in loaded.warnings:
        click.echo(f"warning: {warning.message} (ignored)", err=True)
    if loaded.problems:
        _fail(ctx, "invalid ConfigMap", [p.message for p in loaded.problems])
    labels = _labels(node_labels)
    out = {
        "nodeslo": {"spec": render.nodeslo_spec(loaded.config, labels)},
        "nodemetric": {"spec": render.nodemetric_spec(loaded.config, labels)},
    }
    click.echo(json.dumps(out, indent=2, sort_keys=True))
