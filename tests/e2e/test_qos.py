"""The agent's QoS plugins act on real pods (issue 15, test 4): BECPUSuppress caps the
kubelet's best-effort cgroup on a node whose LS pods are busy, and the BE pod's
CPU, as the kernel counts it, drops."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kube import rest, slo
from manager import render
from tests.e2e import pods
from tests.e2e.conftest import RealCluster
from tests.e2e.test_pod_usage import agent_on

pytestmark = [pytest.mark.e2e, pytest.mark.controlplane, pytest.mark.slow]

NODE = "n2"


def _rate(usage_file: Path, seconds: float) -> float:
    """Cores used over `seconds`, from a cpuacct.usage counter (ns)."""
    before, start = int(usage_file.read_text()), time.monotonic()
    time.sleep(seconds)
    return (int(usage_file.read_text()) - before) / 1e9 / (time.monotonic() - start)


def _write_nodeslo(kube: rest.Rest, spec: dict[str, Any]) -> Callable[[], None]:
    """NODE's NodeSLO set by hand to `spec`; the function that puts back what was there.

    A nodeqos-manager installed by an earlier e2e test may have rendered one
    already (and would render it again): the opt-out annotation keeps its hands
    off this one until it is restored.
    """
    path = f"/apis/{slo.API_VERSION}/nodeslos/{NODE}"
    try:
        previous: dict[str, Any] | None = kube.get(path)
    except rest.ApiError as err:
        if err.status != 404:
            raise
        previous = None
    body: dict[str, Any] = {
        "apiVersion": slo.API_VERSION,
        "kind": "NodeSLO",
        "metadata": {"name": NODE, "annotations": {render.OPT_OUT_ANNOTATION: "false"}},
        "spec": spec,
    }
    if previous is None:
        kube.create(f"/apis/{slo.API_VERSION}/nodeslos", body)
    else:
        body["metadata"]["resourceVersion"] = previous["metadata"]["resourceVersion"]
        kube.replace(path, body)

    def restore() -> None:
        if previous is None:
            kube.delete(path)
            return
        current = kube.get(path)
        previous["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        kube.replace(path, previous)

    return restore


def test_be_cpu_suppress_caps_a_real_best_effort_pod(
    real_cluster: RealCluster, e2e_namespace: str, tmp_path: Path
) -> None:
    """With LS pods busy, the BE cgroup gets a CFS quota and the BE busy loop slows down."""
    kube = real_cluster.kube
    node = real_cluster.nodes[NODE]
    bodies = [
        pods.pod("ls-busy", node=NODE, command=pods.BUSY_LOOP, cpu="500m", requests_only=True),
        pods.pod("be-busy", node=NODE, command=pods.BUSY_LOOP),
    ]
    for body in bodies:
        kube.create(f"/api/v1/namespaces/{e2e_namespace}/pods", body)
    running = {
        p["metadata"]["name"]: p
        for p in pods.wait_running(kube, e2e_namespace, ["ls-busy", "be-busy"])
    }
    cpu = Path("/sys/fs/cgroup/cpu", node.cgroup_parent, "kubepods", "besteffort")
    be_usage = (
        Path("/sys/fs/cgroup/cpuacct", node.cgroup_parent, "kubepods", "besteffort")
        / f"pod{running['be-busy']['metadata']['uid']}"
        / "cpuacct.usage"
    )
    assert (cpu / "cpu.cfs_quota_us").read_text().strip() == "-1"  # the kubelet leaves BE unlimited
    unsuppressed = _rate(be_usage, 5)
    restore = _write_nodeslo(
        kube,
        {
            "resourceUsedThresholdWithBE": {
                "enable": True,
                "cpuSuppressThresholdPercent": 40,
                "cpuSuppressPolicy": "cfsQuota",
            }
        },
    )
    try:
        with agent_on(real_cluster, NODE, tmp_path) as log_path:
            quota = pods.wait_for(
                lambda: (
                    int((cpu / "cpu.cfs_quota_us").read_text()) > 0
                    and int((cpu / "cpu.cfs_quota_us").read_text())
                ),
                "a CFS quota on the best-effort cgroup",
                timeout=60,
            )
            period = int((cpu / "cpu.cfs_period_us").read_text())
            time.sleep(2)
            quota = int((cpu / "cpu.cfs_quota_us").read_text())
            suppressed = _rate(be_usage, 5)
            agent_log = log_path.read_text(errors="replace")
    finally:
        restore()
    # 40 % of the node's CPUs minus what the LS pod and the rest of the machine use.
    assert quota < 0.4 * node_cpus(real_cluster) * period, (quota, period)
    assert suppressed <= quota / period + 0.05, (suppressed, quota, period)
    # Halved, when the BE pod had more than twice its cap to lose: on a machine busy
    # with other work a best-effort pod (cpu.shares 2) may get little CPU to begin with.
    if unsuppressed > 2 * quota / period:
        assert suppressed < unsuppressed / 2, (suppressed, unsuppressed)
    assert "Traceback" not in agent_log, agent_log[-3000:]


def node_cpus(cluster: RealCluster) -> int:
    return int(cluster.kube.get(f"/api/v1/nodes/{NODE}")["status"]["capacity"]["cpu"])
