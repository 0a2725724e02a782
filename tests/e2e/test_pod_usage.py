"""The agent measures real pods that a real kubelet started (issue 15, test 2).

The agent runs as the DaemonSet would run it, on the host's own cgroup and /proc
trees, told the kubelet's cgroupRoot; it reports node n1's NodeMetric.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kube import quantity, rest, slo
from tests.e2e import pods
from tests.e2e.conftest import RealCluster

pytestmark = [pytest.mark.e2e, pytest.mark.controlplane, pytest.mark.slow]

NODEMETRICS = f"/apis/{slo.API_VERSION}/nodemetrics"
HELD_BYTES = 48 * 1024 * 1024
# 48 MiB in the pod's /dev/shm (tmpfs, 64 MiB in a containerd sandbox): swap-backed
# pages charged to the writer's memory cgroup, counted as anon in memory.stat
# (busybox's shell turned out to keep no big variable resident).
HOLD_MEMORY = f"head -c {HELD_BYTES} /dev/zero > /dev/shm/held; sleep 100000"


@contextlib.contextmanager
def agent_on(cluster: RealCluster, node: str, workdir: Path) -> Iterator[Path]:
    log_path = workdir / f"agent-{node}.log"
    argv = [
        sys.executable,
        "-m",
        "agent",
        f"--node-name={node}",
        f"--kubeconfig={cluster.plane.kubeconfig}",
        "--cgroup-root=/sys/fs/cgroup",
        "--proc-root=/proc",
        f"--kubelet-cgroup-root=/{cluster.nodes[node].cgroup_parent}",
        "--collect-interval=1s",
        f"--metric-cache-path={workdir / 'metriccache.db'}",
        "--metrics-addr=127.0.0.1:0",
    ]
    with log_path.open("ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        yield log_path
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _usage(pod_metric: dict[str, Any]) -> tuple[int, int]:
    res = pod_metric["podUsage"]["resources"]
    return quantity.cpu_millis(res["cpu"]), quantity.memory_bytes(res["memory"])


def test_agent_measures_busy_idle_and_memory_pods(
    real_cluster: RealCluster, e2e_namespace: str, tmp_path: Path
) -> None:
    """A busy loop limited to 500m shows 0.4-0.6 cores, an idle pod ~0, held memory within 10 %."""
    kube = real_cluster.kube
    wanted = {
        "busy": pods.pod("busy", node="n1", command=pods.BUSY_LOOP, cpu="500m"),
        "idle": pods.pod("idle", node="n1", cpu="100m"),
        "holder": pods.pod("holder", node="n1", command=HOLD_MEMORY, cpu="100m", memory="128Mi"),
    }
    for body in wanted.values():
        kube.create(f"/api/v1/namespaces/{e2e_namespace}/pods", body)
    running = {
        p["metadata"]["name"]: p for p in pods.wait_running(kube, e2e_namespace, list(wanted))
    }
    cpuacct = Path("/sys/fs/cgroup/cpuacct", real_cluster.nodes["n1"].cgroup_parent, "kubepods")
    busy_dir = cpuacct / f"pod{running['busy']['metadata']['uid']}"

    def busy_usage() -> int:
        return int((busy_dir / "cpuacct.usage").read_text())

    started, busy_start = time.monotonic(), busy_usage()
    with contextlib.suppress(rest.ApiError):  # left by an earlier test of the session
        kube.delete(f"{NODEMETRICS}/n1")
    kube.create(
        NODEMETRICS,
        {
            "apiVersion": slo.API_VERSION,
            "kind": "NodeMetric",
            "metadata": {"name": "n1"},
            "spec": {
                "metricCollectPolicy": {"aggregateDurationSeconds": 10, "reportIntervalSeconds": 15}
            },
        },
    )
    with agent_on(real_cluster, "n1", tmp_path) as log_path:

        def measured() -> tuple[str, dict[str, tuple[int, int]]] | None:
            """The report's updateTime and the three pods' usage, once it has all three."""
            status = kube.get(f"{NODEMETRICS}/n1").get("status") or {}
            found = {
                p["name"]: _usage(p)
                for p in status.get("podsMetric", [])
                if p["namespace"] == e2e_namespace
            }
            return (str(status.get("updateTime")), found) if set(found) == set(wanted) else None

        try:
            first_time, _ = pods.wait_for(measured, "a NodeMetric with the three pods", timeout=60)
            # The second report averages a window the agent saw whole. It is told
            # apart by its updateTime: a busy pod held at its quota can report the
            # same usage twice (seen beside stress-ng, the kubepods shares winning).
            _, second = pods.wait_for(
                lambda: (m := measured()) and m[0] != first_time and m,
                "a second report",
                timeout=60,
            )
        finally:
            agent_log = log_path.read_text(errors="replace")
            print(agent_log[-4000:])
    busy_cpu, _ = second["busy"]
    idle_cpu, _ = second["idle"]
    _, held = second["holder"]
    # Two cores shared with everything else on the machine: the loop gets its 500m
    # only when the machine has them to give, so the kernel's own count is the
    # reference, and 0.4-0.6 cores is asserted when the loop really ran that fast.
    elapsed = time.monotonic() - started
    kernel_rate = (busy_usage() - busy_start) / 1e6 / elapsed
    assert busy_cpu <= 600, second  # the 500m limit holds
    assert abs(busy_cpu - kernel_rate) <= 100, (second, kernel_rate)
    if kernel_rate >= 450:
        assert busy_cpu >= 400, (second, kernel_rate)
    assert idle_cpu <= 20, second
    assert 0.9 * HELD_BYTES <= held <= 1.1 * HELD_BYTES, second
    assert "Traceback" not in agent_log, agent_log[-3000:]
