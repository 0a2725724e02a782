"""The agent's configuration, and the parsers of the flag values that need one.

The CLI (`agent.cli`) turns flags into one frozen `AgentConfig`; everything
below it receives that value (or the parts it needs) and never reads flags or
the environment itself. Parsers raise `ValueError` with a message meant for
the user; the CLI turns it into a usage error (exit status 2).
"""

from __future__ import annotations

import enum
import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import cgroups
from agent import features, predictor
from kube import quantity
from qosmanager import features as qfeatures

DEFAULT_METRICS_PORT = 9316  # koordlet's default --addr port


class NodeUsageSource(enum.Enum):
    """Where node CPU and memory usage come from (`--node-usage-source`)."""

    # /proc/stat and /proc/meminfo: the whole machine (koordlet's measure).
    PROC = "proc"
    # The kubelet's kubepods cgroup (under --kubelet-cgroup-root): the node's pods
    # only. For several kubelets on one machine, which share one /proc, or a node
    # where only pod load should count.
    KUBEPODS = "kubepods"


@dataclass(frozen=True, slots=True)
class ListenAddress:
    """Where `/metrics` and `/healthz` are served; host "" means every IPv4 interface."""

    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_duration(text: str) -> float:
    """A positive Go duration ("1s", "500ms", "1m30s") in seconds."""
    try:
        seconds = quantity.parse_go_duration(text.strip()).total_seconds()
    except ValueError:
        raise ValueError(
            f"{text!r} is not a duration; use Go syntax such as 1s, 500ms, 1m30s"
        ) from None
    if seconds <= 0:
        raise ValueError(f"{text!r}: must be greater than zero")
    return seconds


def parse_kubelet_cgroup_root(text: str) -> PurePosixPath:
    """The kubelet's cgroupRoot ("/", "/nodeqos-n1") as a path relative to a hierarchy."""
    path = PurePosixPath(text.strip())
    if not path.is_absolute() or ".." in path.parts:
        raise ValueError(f"{text!r} must be an absolute cgroup path such as / or /kubelet-root")
    return path.relative_to("/")


def _valid_hostname(host: str) -> bool:
    labels = host.rstrip(".").split(".")
    return len(host) <= 253 and all(
        0 < len(label) <= 63
        and label[0] != "-"
        and label[-1] != "-"
        and all(ch.isascii() and (ch.isalnum() or ch == "-") for ch in label)
        for label in labels
    )


def parse_listen_address(text: str) -> ListenAddress:
    """`host:port`, `:port` (every interface) or `[ipv6]:port`; port 0 picks a free one."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep:
        raise ValueError(f"{text!r}: expected host:port, e.g. :{DEFAULT_METRICS_PORT}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{text!r}: {host!r} is not an IPv6 address") from None
    elif ":" in host:
        raise ValueError(f"{text!r}: write an IPv6 host in brackets, e.g. [::1]:9316")
    elif host and not _valid_hostname(host):
        raise ValueError(f"{text!r}: {host!r} is not a valid host name or address")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"{text!r}: port must be a number from 0 to 65535")
    return ListenAddress(host, int(port_text))


def default_state_dir(environ: dict[str, str] | None = None) -> Path:
    """$XDG_STATE_HOME/nodeqos, else ~/.local/state/nodeqos (XDG base directory spec)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_STATE_HOME") or ""
    # The spec says a relative XDG_STATE_HOME is invalid and must be ignored.
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "nodeqos"


def default_metric_cache_path(environ: dict[str, str] | None = None) -> Path:
    """The metric cache file in the user's state directory."""
    return default_state_dir(environ) / "metriccache.db"


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentConfig:
    """Everything the agent was asked to do, validated."""

    node_name: str
    cgroup_root: Path
    proc_root: Path
    cgroup_driver: str = "auto"  # auto | systemd | cgroupfs
    # The kubelet's cgroupRoot, relative to each hierarchy ("" for the default "/").
    kubelet_cgroup_root: PurePosixPath = cgroups.DEFAULT_KUBELET_ROOT
    node_usage_source: NodeUsageSource = NodeUsageSource.PROC
    collect_interval: float = 1.0
    metric_cache_path: Path
    metrics_addr: ListenAddress | None = ListenAddress("", DEFAULT_METRICS_PORT)
    feature_gates: qfeatures.FeatureGates = field(default_factory=features.defaults)
    kubeconfig: Path | None = None
    standalone: bool = False
    run_for: float | None = None
    print_nodemetric: bool = False
    # Standalone pod discovery rescans the kubepods tree every this many seconds.
    rescan_seconds: float = 10.0
    # The peak predictor's --prediction-* flags (in-cluster only).
    prediction: predictor.PredictorConfig = field(default_factory=predictor.PredictorConfig)

    @property
    def rescan_every(self) -> int:
        """Rounds between two scans of the kubepods hierarchy."""
        return max(1, round(self.rescan_seconds / self.collect_interval))
