"""BE CPU idle on a real node (issue 34): the agent with `BECPUIdle` marks BE pods' cgroups
SCHED_IDLE, and the kubelet still restarts (Koordinator issue 2732 must not happen here).

On node n3 (a real kubelet and containerd, cgroup v1, cgroupfs driver; tests/e2e/conftest.py)
the agent runs on the host as tests/e2e/test_qos.py runs it, with `--feature-gates
BECPUIdle=true`:

- each BE pod's cgroup gets cpu.idle = 1; the LS pod's, the kubepods root's and the QoS
  cgroups' stay 0;
- the kubelet is restarted: it renews its Lease again, the Node is Ready, its start-up
  write of the besteffort QoS cgroup's cpu.shares (2) lands (the test first puts 1024
  there), and the pods keep running, same containers, no restart, still idle;
- the agent is killed (no chance to clean up) and started with the gate off: the pods
  are back at cpu.idle 0 with kubelet's cpu.shares 2; an agent with the gate on that is
  stopped (SIGTERM) leaves them at 0 too.

`test_idle_on_the_qos_cgroup_stops_the_kubelet` shows the check above can fail: the same
restart with cpu.idle = 1 on the besteffort QoS cgroup (what Koordinator's PR 3174 does)
and the kubelet does not come back.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from kube import rest
from testbed import localnodes
from tests.e2e import pods
from tests.e2e.conftest import RealCluster

pytestmark = [pytest.mark.e2e, pytest.mark.controlplane, pytest.mark.slow]

NODE = "n3"
GATE_ON = ("--feature-gates=BECPUIdle=true", "--be-cpu-idle-interval-seconds=1")
# kubelet's BestEffort QoS cgroup cpu.shares (MinShares), written at every start.
KUBELET_BE_SHARES = "2"
MARKER_SHARES = "1024"


@contextlib.contextmanager
def agent(
    cluster: RealCluster, workdir: Path, args: Sequence[str] = ()
) -> Iterator[subprocess.Popen[bytes]]:
    """The agent for NODE on the host (as tests/e2e/test_pod_usage.agent_on), with `args`;
    SIGTERM on exit unless the test ended it already."""
    argv = [
        sys.executable,
        "-m",
        "agent",
        f"--node-name={NODE}",
        f"--kubeconfig={cluster.plane.kubeconfig}",
        "--cgroup-root=/sys/fs/cgroup",
        "--proc-root=/proc",
        f"--kubelet-cgroup-root=/{cluster.nodes[NODE].cgroup_parent}",
        "--collect-interval=1s",
        f"--metric-cache-path={workdir / 'metriccache.db'}",
        "--metrics-addr=",
        *args,
    ]
    with (workdir / "agent.log").open("ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def cpu_dir(cluster: RealCluster, *parts: str) -> Path:
    return Path("/sys/fs/cgroup/cpu", cluster.nodes[NODE].cgroup_parent, "kubepods", *parts)


def pod_dir(cluster: RealCluster, pod: dict[str, Any]) -> Path:
    uid = pod["metadata"]["uid"]
    level = {"BestEffort": "besteffort", "Burstable": "burstable"}[pod["status"]["qosClass"]]
    return cpu_dir(cluster, level, f"pod{uid}")


def value(path: Path) -> str:
    return path.read_text().strip()


def containers(pod: dict[str, Any]) -> list[tuple[str, int]]:
    return [(s["containerID"], s["restartCount"]) for s in pod["status"]["containerStatuses"]]


def lease_renewed_after(cluster: RealCluster, since: datetime) -> bool:
    try:
        lease = cluster.kube.get(
            f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{NODE}"
        )
    except rest.ApiError as err:
        if err.not_found:  # not made again yet (the garbage collector may have taken it)
            return False
        raise
    renewed = datetime.fromisoformat(lease["spec"]["renewTime"].replace("Z", "+00:00"))
    return renewed > since


def node_ready(cluster: RealCluster) -> bool:
    node = cluster.kube.get(f"/api/v1/nodes/{NODE}")
    conditions = node["status"].get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_be_pods_idle_survive_a_kubelet_restart_and_go_back_with_the_gate_off(
    real_cluster: RealCluster, e2e_namespace: str, tmp_path: Path
) -> None:
    """cpu.idle 1 on the BE pods only; kubelet restarts cleanly around them; gate off: 0 again."""
    kube, node = real_cluster.kube, real_cluster.nodes[NODE]
    bodies = [
        pods.pod("be-plain", node=NODE),
        pods.pod("be-labelled", node=NODE, labels={"koordinator.sh/qosClass": "BE"}),
        pods.pod("ls", node=NODE, cpu="100m", requests_only=True),
    ]
    for body in bodies:
        kube.create(f"/api/v1/namespaces/{e2e_namespace}/pods", body)
    names = [b["metadata"]["name"] for b in bodies]
    running = {p["metadata"]["name"]: p for p in pods.wait_running(kube, e2e_namespace, names)}
    be = [pod_dir(real_cluster, running[n]) for n in ("be-plain", "be-labelled")]
    ls = pod_dir(real_cluster, running["ls"])
    roots = [
        cpu_dir(real_cluster),
        cpu_dir(real_cluster, "besteffort"),
        cpu_dir(real_cluster, "burstable"),
    ]
    assert [value(d / "cpu.idle") for d in [*be, ls, *roots]] == ["0"] * 6
    assert [value(d / "cpu.shares") for d in be] == [KUBELET_BE_SHARES] * 2

    with agent(real_cluster, tmp_path, GATE_ON) as proc:
        pods.wait_for(
            lambda: all(value(d / "cpu.idle") == "1" for d in be),
            "cpu.idle = 1 on both BE pod cgroups",
            timeout=90,
        )
        assert value(ls / "cpu.idle") == "0"
        assert [value(d / "cpu.idle") for d in roots] == ["0"] * 3
        assert [value(d / "cpu.shares") for d in be] == ["3"] * 2  # the kernel's, for idle groups

        # the kubelet restarts around idle pods
        qos = cpu_dir(real_cluster, "besteffort", "cpu.shares")
        node.stop_kubelet()
        restarted = datetime.now().astimezone()  # a Lease renewed after this is the new kubelet's
        qos.write_text(MARKER_SHARES)  # kubelet's start-up write must put its 2 back
        log_start = node.log_path("kubelet").stat().st_size
        node.start_kubelet()
        pods.wait_for(
            lambda: lease_renewed_after(real_cluster, restarted),
            "the restarted kubelet's Lease",
            timeout=90,
        )
        pods.wait_for(
            lambda: value(qos) == KUBELET_BE_SHARES,
            "kubelet's QoS write (cpu.shares 2)",
            timeout=90,
        )
        pods.wait_for(lambda: node_ready(real_cluster), f"{NODE} Ready", timeout=90)
        node.wait_ready()  # raises if the kubelet exited
        kubelet_log = node.log_path("kubelet").read_bytes()[log_start:].decode(errors="replace")
        assert "Failed to start ContainerManager" not in kubelet_log
        assert "cpu.shares: invalid argument" not in kubelet_log
        after = {p["metadata"]["name"]: p for p in pods.wait_running(kube, e2e_namespace, names)}
        for name in names:
            assert containers(after[name]) == containers(running[name]), name
        assert [value(d / "cpu.idle") for d in be] == ["1"] * 2
        assert [value(d / "cpu.idle") for d in roots] == ["0"] * 3

        proc.kill()  # no SIGTERM: the gate-off start must clean up on its own
        proc.wait(15)
    assert [value(d / "cpu.idle") for d in be] == ["1"] * 2

    with agent(real_cluster, tmp_path):  # BECPUIdle at its default: off
        pods.wait_for(
            lambda: all(value(d / "cpu.idle") == "0" for d in be),
            "cpu.idle back to 0 with the gate off",
            timeout=90,
        )
        assert [value(d / "cpu.shares") for d in be] == [KUBELET_BE_SHARES] * 2

    with agent(real_cluster, tmp_path, GATE_ON):
        pods.wait_for(
            lambda: all(value(d / "cpu.idle") == "1" for d in be), "idle again", timeout=90
        )
    # left the `with`: SIGTERM, and the strategy sets its pods back as it stops
    assert [value(d / "cpu.idle") for d in be] == ["0"] * 2
    assert [value(d / "cpu.shares") for d in be] == [KUBELET_BE_SHARES] * 2
    log = (tmp_path / "agent.log").read_text(errors="replace")
    assert "BECPUIdle: cpu.idle set back to 0 on 2 BE pod cgroup(s)" in log


def test_idle_on_the_qos_cgroup_stops_the_kubelet(real_cluster: RealCluster) -> None:
    """The control: cpu.idle = 1 on the besteffort QoS cgroup and the restarted kubelet
    cannot write its cpu.shares there and exits (Koordinator issue 2732); with 0 it starts."""
    node = real_cluster.nodes[NODE]
    qos_idle = cpu_dir(real_cluster, "besteffort", "cpu.idle")
    node.stop_kubelet()
    started = datetime.now().astimezone()
    log_start = node.log_path("kubelet").stat().st_size
    try:
        qos_idle.write_text("1")
        node.start_kubelet()
        with pytest.raises(localnodes.NodeError, match="exited"):
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                node.wait_ready()  # returns while the old Ready status stands
                time.sleep(1)
        log = node.log_path("kubelet").read_bytes()[log_start:].decode(errors="replace")
        assert "cpu.shares: invalid argument" in log
    finally:
        qos_idle.write_text("0")
        node.stop_kubelet()
        node.start_kubelet()
    pods.wait_for(
        lambda: lease_renewed_after(real_cluster, started), "the kubelet's Lease", timeout=90
    )
    node.wait_ready()
