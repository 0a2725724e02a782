"""BECPUShares as the stock agent loads it: its entry point, its flags, its writes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import nodeqos_beshares
import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

import cgroups
import metriccache
import qosmanager
from agent import cli
from kube import eviction, nodeslo, objects
from metriccache import kinds

DRIVER = cgroups.Driver.SYSTEMD


def pod(name: str, *, qos: str, phase: str = "Running") -> dict[str, Any]:
    """A Burstable pod (it requests CPU) whose Koordinator QoS class is `qos`."""
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"0000-{name}",
            "labels": {"koordinator.sh/qosClass": qos},
        },
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": phase, "qosClass": "Burstable"},
    }


class States:
    """The node as the agent's informer would show it: these pods, default NodeSLO."""

    def __init__(self, pods: Sequence[qosmanager.PodMeta]) -> None:
        self._pods = list(pods)

    def node(self) -> objects.Node | None:
        return None

    def pods(self) -> Sequence[qosmanager.PodMeta]:
        return self._pods

    def node_slo(self) -> nodeslo.NodeSLOSpec:
        return nodeslo.NodeSLOSpec()

    def wait_synced(self, timeout: float) -> bool:
        return True


class NoEvictions:
    def evict(self, namespace: str, name: str, uid: str) -> eviction.Result:
        raise AssertionError("BECPUShares never evicts")

    def record(self, pod: qosmanager.PodMeta, event_type: str, reason: str, message: str) -> None:
        raise AssertionError("BECPUShares never records events")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A cgroup v2 root with the kubepods Burstable slice."""
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    return tmp_path


def run_one_tick(root: Path, pods: list[dict[str, Any]], shares: int = 2) -> list[Path]:
    """One tick of the plugin over `pods`; returns each pod's cpu.weight file."""
    metas = [qosmanager.PodMeta.from_api(p, DRIVER) for p in pods]
    files = []
    for meta in metas:
        (root / meta.cgroup_dir).mkdir(parents=True)
        files.append(root / meta.cgroup_dir / "cpu.weight")
        files[-1].write_text("39\n")  # kubelet's weight for 1 CPU of requests
    fs = cgroups.CgroupFS(root=root, version=cgroups.CgroupVersion.V2, driver=DRIVER)
    metrics = qosmanager.QoSMetrics(CollectorRegistry())
    handle = qosmanager.Handle(
        fs=fs,
        executor=qosmanager.ResourceExecutor(fs, metrics=metrics),
        evictor=qosmanager.Evictor(NoEvictions(), metrics=metrics),
        metrics=metrics,
    )
    plugin = nodeqos_beshares.BECPUShares(handle, shares=shares)
    cache = metriccache.MetricCache(kinds.default_registry())
    plugin.setup(None, cache, States(metas))  # type: ignore[arg-type]  # no API calls
    plugin.tick()
    return files


def test_be_pods_get_the_smallest_weight_and_others_keep_theirs(tree: Path) -> None:
    """BE pods: weight 1 (shares 2); the LS pod and a finished BE pod are untouched."""
    be, ls, done = run_one_tick(
        tree,
        [pod("batch", qos="BE"), pod("web", qos="LS"), pod("old", qos="BE", phase="Succeeded")],
    )
    assert be.read_text().strip() == "1"
    assert ls.read_text().strip() == "39"
    assert done.read_text().strip() == "39"


def test_the_agent_command_carries_the_plugin_flags_and_gate() -> None:
    """Installed, the plugin's flags and its gate are on the stock nodeqos-agent command line."""
    result = CliRunner().invoke(cli.build_command(), ["--help"])
    assert result.exit_code == 0, result.output
    assert "--be-cpu-shares-interval-seconds" in result.output
    assert "--be-cpu-shares " in result.output
    assert "BECPUShares" in result.output


def test_shares_out_of_the_kernel_range_are_a_usage_error() -> None:
    """--be-cpu-shares 1 exits 2 naming the flag and the range."""
    result = CliRunner().invoke(cli.build_command(), ["--standalone", "--be-cpu-shares", "1"])
    assert result.exit_code == 2
    assert "--be-cpu-shares" in result.output
    assert "2<=x<=262144" in result.output
