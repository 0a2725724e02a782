"""testbed.onlineserver: the online pod's manifest, and `measure` against a real server
with the real vegeta and a real cgroup v1 node root."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed import onlineserver, vegeta


@pytest.fixture
def node_root() -> Iterator[str]:
    """A node name whose cgroup v1 root exists in the machine's cpuacct hierarchy."""
    if not os.access(onlineserver.CPUACCT, os.W_OK):
        pytest.fail(f"{onlineserver.CPUACCT} is not writable: run the tests as root on cgroup v1")
    name = f"onlinetest-{uuid.uuid4().hex[:8]}"
    directory = onlineserver.CPUACCT / f"nodeqos-{name}"
    directory.mkdir()
    try:
        yield name
    finally:
        directory.rmdir()


def test_the_pod_is_ls_burstable_with_no_cpu_limit_on_the_node_asked() -> None:
    pod = onlineserver.pod("ns", node="n1", name="web-n1", cpu_request="600m")
    container = pod["spec"]["containers"][0]
    assert pod["metadata"]["labels"]["koordinator.sh/qosClass"] == "LS"
    assert pod["spec"]["nodeName"] == "n1" and pod["metadata"]["name"] == "web-n1"
    assert container["resources"]["requests"]["cpu"] == "600m"
    assert "cpu" not in container["resources"]["limits"]  # no quota to throttle it
    assert "nodeName" not in onlineserver.pod("ns")["spec"]


def test_problem_names_the_waiting_reason() -> None:
    status = {"containerStatuses": [{"state": {"waiting": {"reason": "ErrImageNeverPull"}}}]}
    assert onlineserver.problem({"status": status}) == "waiting: ErrImageNeverPull"
    assert "Ready=False" in onlineserver.problem(
        {"status": {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]}}
    )


def test_measure_gives_vegetas_figures_and_the_node_roots_cpu(
    page: str, node_root: str, tmp_path: Path
) -> None:
    """An idle node root reads 0 % and a busy one more; every request sent is counted."""
    server = onlineserver.Server(page, "uid", node_root)
    generator = vegeta.find()
    idle = onlineserver.measure(
        server, generator, rate=50, seconds=2, workdir=tmp_path / "a", node_cpus=2
    )
    # 50/s for 2 s; vegeta's pacer stops at the deadline, so a starved generator sends
    # a few less (98 at load 15), never more
    assert 90 <= idle.requests <= 100 and idle.errors == 0
    assert 0 < idle.p50_ms <= idle.p99_ms <= idle.p999_ms
    assert idle.node_cpu_percent == 0.0
    procs = onlineserver.CPUACCT / f"nodeqos-{node_root}" / "cgroup.procs"
    busy = subprocess.Popen(
        ["sh", "-c", 'echo $$ > "$0" && exec sh -c "while :; do :; done"', str(procs)]
    )
    try:
        loaded = onlineserver.measure(
            server, generator, rate=50, seconds=2, workdir=tmp_path / "b", node_cpus=2
        )
    finally:
        busy.kill()
        busy.wait(timeout=10)
    assert 90 <= loaded.requests <= 100
    assert loaded.node_cpu_percent > 5.0  # one busy thread of two cores, on a shared machine
