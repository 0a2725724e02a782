"""The `nodeqos-agent` command line: flags in the koordlet spirit, then the agent.

`main` is the composition root: it parses and validates every flag into one
`AgentConfig`, builds the one `CollectorRegistry`, installs the signal
handlers and runs the agent: in-cluster (`agent.cluster`, the default) or,
with `--standalone`, without an API server (`agent.standalone`). A bad flag
value, or credentials that cannot be loaded, exit with status 2 and say why
(click's usage-error convention); a QoS plugin failing to set up exits 1.
The literal host paths below are flag defaults only; the DaemonSet passes
/host/sys/fs/cgroup and /host/proc.
"""

from __future__ import annotations

import logging
import resource
import signal
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from prometheus_client import CollectorRegistry

import qosmanager
from agent import cluster, config, features, standalone
from qosmanager import features as qfeatures

log = logging.getLogger("agent")


def _parsed_by(parse: Callable[[str], Any]) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A click callback running one of `agent.config`'s parsers (ValueError -> exit 2)."""

    def callback(_ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
        if not isinstance(value, str):
            return value  # unset (None)
        try:
            return parse(value)
        except ValueError as err:
            raise click.BadParameter(str(err)) from None

    return callback


_GATES_HELP = "; ".join(
    f"{f.name}={str(f.default).lower()} ({f.stage.value})" for f in features.FEATURES
)


def _raise_open_file_limit() -> None:
    """Soft RLIMIT_NOFILE up to the hard limit, as Go programs (koordlet) get by default.

    The pod collector keeps cgroup files open (agent.collectors.filereader) and
    sizes its budget from the soft limit, which is often 1024.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as err:
            log.debug("cannot raise the open-file limit from %d: %s", soft, err)


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--node-name",
    envvar="NODE_NAME",
    default=socket.gethostname,
    show_default="hostname",
    help="This node's name (env NODE_NAME).",
)
@click.option(
    "--cgroup-root",
    type=click.Path(path_type=Path),
    default="/sys/fs/cgroup",
    show_default=True,
    help="Where the host's cgroup hierarchy is mounted.",
)
@click.option(
    "--proc-root",
    type=click.Path(path_type=Path),
    default="/proc",
    show_default=True,
    help="Where the host's procfs is mounted.",
)
@click.option(
    "--cgroup-driver",
    type=click.Choice(["auto", "systemd", "cgroupfs"]),
    default="auto",
    show_default=True,
    help="The kubelet's cgroup driver.",
)
@click.option(
    "--collect-interval",
    metavar="DURATION",
    default="1s",
    callback=_parsed_by(config.parse_duration),
    show_default=True,
    help="Time between collection rounds (Go duration: 1s, 500ms).",
)
@click.option(
    "--metric-cache-path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    show_default="$XDG_STATE_HOME/nodeqos/metriccache.db",
    help="The metric cache file (kept across restarts).",
)
@click.option(
    "--metrics-addr",
    metavar="HOST:PORT",
    default=f":{config.DEFAULT_METRICS_PORT}",
    show_default=True,
    help='host:port serving /metrics and /healthz; "" serves nothing.',
)
@click.option(
    "--feature-gates",
    metavar="GATES",
    default="",
    callback=_parsed_by(features.parse),
    help=f"Name=bool,... Gates: {_GATES_HELP}.",
)
@click.option(
    "--kubeconfig",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    default=None,
    help="Kubeconfig for in-cluster mode (default: the pod's service account).",
)
@click.option(
    "--standalone",
    "standalone_mode",
    is_flag=True,
    help="Run without a cluster: discover pods from the kubepods cgroups.",
)
@click.option(
    "--run-for",
    metavar="DURATION",
    default=None,
    callback=_parsed_by(config.parse_duration),
    help="Collect for this long, then exit (Go duration: 10s).",
)
@click.option(
    "--print-nodemetric",
    is_flag=True,
    help="On exit, print the NodeMetric status the agent would publish, as YAML.",
)
@click.option("-v", "--verbose", is_flag=True, help="Log debug messages.")
def main(
    node_name: str,
    cgroup_root: Path,
    proc_root: Path,
    cgroup_driver: str,
    collect_interval: float,
    metric_cache_path: Path | None,
    metrics_addr: str,
    feature_gates: qfeatures.FeatureGates,
    kubeconfig: Path | None,
    standalone_mode: bool,
    run_for: float | None,
    print_nodemetric: bool,
    verbose: bool,
) -> None:
    """Run the nodeqos node agent (Koordinator koordlet compatible).

    By default the agent runs in the cluster: it watches its Node, Pods, NodeSLO
    and NodeMetric, publishes the NodeMetric status and runs the QoS plugins.
    With --standalone it only collects, finding pods in the kubepods cgroups.
    """
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    addr = None
    if metrics_addr.strip():
        try:
            addr = config.parse_listen_address(metrics_addr)
        except ValueError as err:
            raise click.BadParameter(str(err), param_hint="--metrics-addr") from None
    cfg = config.AgentConfig(
        node_name=node_name,
        cgroup_root=cgroup_root,
        proc_root=proc_root,
        cgroup_driver=cgroup_driver,
        collect_interval=collect_interval,
        metric_cache_path=metric_cache_path or config.default_metric_cache_path(),
        metrics_addr=addr,
        feature_gates=feature_gates,
        kubeconfig=kubeconfig,
        standalone=standalone_mode,
        run_for=run_for,
        print_nodemetric=print_nodemetric,
    )
    log.info(
        "nodeqos-agent %s on node %s; feature gates %s",
        "standalone" if standalone_mode else "in-cluster",
        node_name,
        cfg.feature_gates.as_dict(),
    )
    _raise_open_file_limit()
    stop = threading.Event()
    previous = {
        signum: signal.signal(signum, lambda _sig, _frame: stop.set())
        for signum in (signal.SIGTERM, signal.SIGINT)
    }
    registry = CollectorRegistry()
    run = standalone.run if standalone_mode else cluster.run
    try:
        run(cfg, registry, stop=stop, out=sys.stdout)
    except standalone.ConfigError as err:
        raise click.BadParameter(str(err), param_hint=err.flag) from None
    except qosmanager.PluginSetupError as err:
        raise click.ClickException(str(err)) from None
    finally:
        for signum, handler in previous.items():  # main may be called in-process (tests)
            signal.signal(signum, handler)
