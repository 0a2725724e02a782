"""The `nodeqos-agent` command line: flags in the koordlet spirit, then the agent.

`build_command` is the composition root. It builds the QoS plugin registry
first (the built-in strategies, the QoS plugins installed through entry points
of group `nodeqos.agent.qos_plugins`, the `qos_plugins` passed in, all unbound,
plus what `registry_extras` adds), because the plugins' flags are part of the
command line. `run(argv, qos_plugins=[...])` is the agent for an image that
composes its own in Python. The command parses
and validates every flag into one `AgentConfig` (a plugin's own flags
configure its instance), builds the one `CollectorRegistry`, installs the
signal handlers and runs the agent: in-cluster (`agent.cluster`, the default) or,
with `--standalone`, without an API server (`agent.standalone`). A bad flag
value, or credentials that cannot be loaded, exit with status 2 and say why
(click's usage-error convention); a QoS plugin failing to set up exits 1.
The literal host paths below are flag defaults only; the DaemonSet passes
/host/sys/fs/cgroup and /host/proc.
"""

from __future__ import annotations

import functools
import logging
import resource
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import click
from prometheus_client import CollectorRegistry

import qosmanager
from agent import assembly, cluster, config, features, predictor, schedule, standalone
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


_HELP = """Run the nodeqos node agent (Koordinator koordlet compatible).

By default the agent runs in the cluster: it watches its Node, Pods, NodeSLO
and NodeMetric, publishes the NodeMetric status and runs the QoS plugins.
With --standalone it only collects, finding pods in the kubepods cgroups.
"""


def _agent_params() -> list[click.Parameter]:
    """The agent's own flags, as new objects for each command `build_command` makes."""
    return [
        click.Option(
            ["--node-name"],
            envvar="NODE_NAME",
            default=socket.gethostname,
            show_default="hostname",
            help="This node's name (env NODE_NAME).",
        ),
        click.Option(
            ["--cgroup-root"],
            type=click.Path(path_type=Path),
            default="/sys/fs/cgroup",
            show_default=True,
            help="Where the host's cgroup hierarchy is mounted.",
        ),
        click.Option(
            ["--proc-root"],
            type=click.Path(path_type=Path),
            default="/proc",
            show_default=True,
            help="Where the host's procfs is mounted.",
        ),
        click.Option(
            ["--cgroup-driver"],
            type=click.Choice(["auto", "systemd", "cgroupfs"]),
            default="auto",
            show_default=True,
            help="The kubelet's cgroup driver.",
        ),
        click.Option(
            ["--kubelet-cgroup-root"],
            metavar="PATH",
            default="/",
            callback=_parsed_by(config.parse_kubelet_cgroup_root),
            show_default=True,
            help="The kubelet's cgroupRoot (its --cgroup-root): pods live in <PATH>/kubepods.",
        ),
        click.Option(
            ["--node-usage-source"],
            type=click.Choice([source.value for source in config.NodeUsageSource]),
            default=config.NodeUsageSource.PROC.value,
            show_default=True,
            help=(
                "Where node CPU and memory usage come from: proc (/proc/stat and "
                "/proc/meminfo, the whole machine) or kubepods (the kubelet's pod cgroup "
                "<--kubelet-cgroup-root>/kubepods, the node's pods only). Use kubepods when "
                "several kubelets run on one machine (they share one /proc) or when only "
                "pod load should count on the node."
            ),
        ),
        click.Option(
            ["--collect-interval"],
            metavar="DURATION",
            default="1s",
            callback=_parsed_by(config.parse_duration),
            show_default=True,
            help="Time between collection rounds (Go duration: 1s, 500ms).",
        ),
        click.Option(
            ["--metric-cache-path"],
            type=click.Path(path_type=Path, dir_okay=False),
            default=None,
            show_default="$XDG_STATE_HOME/nodeqos/metriccache.db",
            help="The metric cache file (kept across restarts).",
        ),
        click.Option(
            ["--metrics-addr"],
            metavar="HOST:PORT",
            default=f":{config.DEFAULT_METRICS_PORT}",
            show_default=True,
            help='host:port serving /metrics and /healthz; "" serves nothing.',
        ),
        click.Option(
            ["--feature-gates"],
            metavar="GATES",
            default="",
            callback=_parsed_by(features.parse),
            help=f"Name=bool,... Gates: {_GATES_HELP}.",
        ),
        click.Option(
            ["--kubeconfig"],
            type=click.Path(path_type=Path, exists=True, dir_okay=False),
            default=None,
            help="Kubeconfig for in-cluster mode (default: the pod's service account).",
        ),
        click.Option(
            ["--standalone", "standalone_mode"],
            is_flag=True,
            help="Run without a cluster: discover pods from the kubepods cgroups.",
        ),
        click.Option(
            ["--run-for"],
            metavar="DURATION",
            default=None,
            callback=_parsed_by(config.parse_duration),
            help="Collect for this long, then exit (Go duration: 10s).",
        ),
        click.Option(
            ["--print-nodemetric"],
            is_flag=True,
            help="On exit, print the NodeMetric status the agent would publish, as YAML.",
        ),
        *_prediction_params(),
        click.Option(["-v", "--verbose"], is_flag=True, help="Log debug messages."),
    ]


def _prediction_params() -> list[click.Parameter]:
    """koordlet's --prediction-* flags (the peak predictor behind prodReclaimableMetric)."""
    d = predictor.PredictorConfig()  # the defaults; the durations' texts below say the same

    def duration(flag: str, text: str, help_text: str) -> click.Option:
        return click.Option(
            [flag],
            metavar="DURATION",
            default=text,
            show_default=True,
            callback=_parsed_by(config.parse_duration),
            help=help_text,
        )

    return [
        duration(
            "--prediction-cold-start-duration",
            "24h",
            "How long a histogram must have been observed before it predicts; "
            "nothing is reclaimed before.",
        ),
        click.Option(
            ["--prediction-safety-margin-percent"],
            type=click.IntRange(0, 1000),
            default=d.safety_margin_percent,
            show_default=True,
            help="Added to the predicted peak, in percent.",
        ),
        duration(
            "--prediction-cpu-histogram-decay-halflife",
            "12h",
            "A CPU sample loses half its weight every this long.",
        ),
        duration(
            "--prediction-memory-histogram-decay-halflife",
            "24h",
            "A memory sample loses half its weight every this long.",
        ),
        duration(
            "--prediction-training-interval",
            "1m",
            "How often the histograms take the last interval's p90 usage.",
        ),
        duration(
            "--prediction-model-checkpoint-interval",
            "10m",
            "How often the histograms are saved into the metric cache.",
        ),
    ]


def build_command(
    registry_extras: Callable[[qosmanager.PluginRegistry], object] | None = None,
    *,
    qos_plugins: Iterable[object] = (),
    clock: schedule.Clock | None = None,
) -> click.Command:
    """The `nodeqos-agent` command over a fresh QoS plugin registry.

    The registry (`qosmanager.plugin_registry(qos_plugins)`) holds every
    built-in strategy, every QoS plugin installed through an entry point and
    the plugin objects of `qos_plugins` (each exporting `NAME`, `FEATURE`,
    `factory`), bound to the node's handle only when the agent runs, after
    parsing; `registry_extras` may then register more by hand
    (`qosmanager.register_qos_ext_plugin`). The command carries the agent's
    flags, every plugin's flags (their callbacks configure the plugin
    instances that then run) and `--qos-extension-plugins`. `clock` (default:
    the system's) times the collection rounds and everything else.
    """
    plugins = qosmanager.plugin_registry(qos_plugins)
    if registry_extras is not None:
        registry_extras(plugins)
    return click.Command(
        "nodeqos-agent",
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
        params=[*_agent_params(), *plugins.click_params()],
        callback=functools.partial(_run_agent, plugins, clock=clock),
        help=_HELP,
    )


def run(
    argv: Sequence[str] | None = None,
    *,
    qos_plugins: Iterable[object] = (),
    clock: schedule.Clock | None = None,
) -> None:
    """Run `nodeqos-agent` with `argv` (default: sys.argv) and extra QoS plugins; exits.

    `clock` replaces the system clock (tests drive a fake node from the agent's
    own clock with it).

    import becgroupidle
    from agent import cli
    cli.run(qos_plugins=[becgroupidle])   # --qos-extension-plugins=BECgroupIdle=true
    """
    build_command(qos_plugins=qos_plugins, clock=clock).main(args=argv, prog_name="nodeqos-agent")


def main() -> None:
    """The `nodeqos-agent` entry point: the built-in and the installed QoS plugins."""
    run()


def _run_agent(
    plugins: qosmanager.PluginRegistry,
    *,
    clock: schedule.Clock | None,
    node_name: str,
    cgroup_root: Path,
    proc_root: Path,
    cgroup_driver: str,
    kubelet_cgroup_root: PurePosixPath,
    node_usage_source: str,
    collect_interval: float,
    metric_cache_path: Path | None,
    metrics_addr: str,
    feature_gates: qfeatures.FeatureGates,
    kubeconfig: Path | None,
    standalone_mode: bool,
    run_for: float | None,
    print_nodemetric: bool,
    verbose: bool,
    qos_extension_plugins: dict[str, bool],
    **prediction: float,
) -> None:
    """Validate the flags into an `AgentConfig` and run the agent (see `_HELP`).

    `prediction` holds the --prediction-* flags (`_prediction_params`).
    """
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    addr = _listen_address(metrics_addr)
    extension_gates = _extension_gates(plugins, qos_extension_plugins)
    cfg = config.AgentConfig(
        node_name=node_name,
        cgroup_root=cgroup_root,
        proc_root=proc_root,
        cgroup_driver=cgroup_driver,
        kubelet_cgroup_root=kubelet_cgroup_root,
        node_usage_source=config.NodeUsageSource(node_usage_source),
        collect_interval=collect_interval,
        metric_cache_path=metric_cache_path or config.default_metric_cache_path(),
        metrics_addr=addr,
        feature_gates=feature_gates,
        kubeconfig=kubeconfig,
        standalone=standalone_mode,
        run_for=run_for,
        print_nodemetric=print_nodemetric,
        prediction=_prediction_config(prediction),
    )
    log.info(
        "nodeqos-agent %s on node %s; feature gates %s; QoS extension plugins %s",
        "standalone" if standalone_mode else "in-cluster",
        node_name,
        cfg.feature_gates.as_dict(),
        extension_gates.as_dict(),
    )
    _raise_open_file_limit()
    _run_until_signalled(cfg, plugins, extension_gates, clock)


def _listen_address(metrics_addr: str) -> config.ListenAddress | None:
    """--metrics-addr parsed; None when it is blank (serve nothing)."""
    if not metrics_addr.strip():
        return None
    try:
        return config.parse_listen_address(metrics_addr)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--metrics-addr") from None


def _extension_gates(
    plugins: qosmanager.PluginRegistry, flags: dict[str, bool]
) -> qfeatures.FeatureGates:
    """--qos-extension-plugins over the registry; an unknown name says how to install one."""
    try:
        return plugins.extension_gates(flags)
    except ValueError as err:  # an unknown or broken name; the message lists the known ones
        hint = (
            f" (an out-of-tree QoS plugin must be installed next to nodeqos-agent, its package"
            f' declaring an entry point in group "{qosmanager.QOS_PLUGIN_GROUP}")'
            if "unknown feature gate" in str(err)
            else ""
        )
        raise click.BadParameter(f"{err}{hint}", param_hint="--qos-extension-plugins") from None


def _prediction_config(flags: Mapping[str, float]) -> predictor.PredictorConfig:
    """The --prediction-* flags as the peak predictor's config."""
    return predictor.PredictorConfig(
        cold_start=flags["prediction_cold_start_duration"],
        safety_margin_percent=int(flags["prediction_safety_margin_percent"]),
        cpu_half_life=flags["prediction_cpu_histogram_decay_halflife"],
        memory_half_life=flags["prediction_memory_histogram_decay_halflife"],
        training_interval=flags["prediction_training_interval"],
        checkpoint_interval=flags["prediction_model_checkpoint_interval"],
    )


def _run_until_signalled(
    cfg: config.AgentConfig,
    plugins: qosmanager.PluginRegistry,
    extension_gates: qfeatures.FeatureGates,
    clock: schedule.Clock | None,
) -> None:
    """Run standalone or in the cluster until SIGTERM or SIGINT (or --run-for) stops it."""
    stop = threading.Event()
    previous = {
        signum: signal.signal(signum, lambda _sig, _frame: stop.set())
        for signum in (signal.SIGTERM, signal.SIGINT)
    }
    registry = CollectorRegistry()
    try:
        if cfg.standalone:  # collection only: no QoS plugin runs
            standalone.run(cfg, registry, stop=stop, out=sys.stdout, clock=clock)
        else:
            cluster.run(
                cfg,
                registry,
                plugins=plugins,
                extension_gates=extension_gates,
                stop=stop,
                out=sys.stdout,
                clock=clock,
            )
    except assembly.ConfigError as err:
        raise click.BadParameter(str(err), param_hint=err.flag) from None
    except qosmanager.PluginSetupError as err:
        raise click.ClickException(str(err)) from None
    finally:
        for signum, handler in previous.items():  # main may be called in-process (tests)
            signal.signal(signum, handler)
