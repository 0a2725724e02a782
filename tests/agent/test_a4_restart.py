"""A4: a restarted agent's first NodeMetric already carries the 5m aggregates.

Five minutes of real collection are replaced by history written through the
public metriccache API before the first start (6 min of 1-core samples). The
first agent then collects a distinctive 3 cores for ~15 s and is killed with
SIGKILL (no shutdown flush); the second agent, on the same cache file, must
publish 5m (and, with 6 min of history, 10m) aggregates in its very first
report, and those aggregates must include what the killed agent collected.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent import kinds as agent_kinds
from kube import rest, slo
from metriccache import MetricCache, kinds
from testbed import controlplane, localcluster
from tests.agent.clusterkit import (
    EMPTY_USAGE,
    GIB,
    AgentProcess,
    LiveNode,
    cleanup_cluster_objects,
    seed_cache,
    wait_for_report,
)

pytestmark = pytest.mark.controlplane

HISTORY_CPU = 1.0  # cores, the seeded history and the load after the restart
FIRST_RUN_CPU = 3.0  # cores, what only the killed agent saw
FIRST_RUN_SECONDS = 15.0  # three flushes of the metric cache (every 5 s)
# Rounds the first run completes before it is killed: at the 200 ms interval 12 s, but a
# loaded machine runs fewer rounds a second (18 in the checked window at load 19 where 20
# were asserted), so the kill waits for the rounds, not for the clock alone.
FIRST_RUN_ROUNDS = 60


@pytest.fixture
def node_name(kube: rest.Rest) -> Iterator[str]:
    name = f"a4-{uuid.uuid4().hex[:8]}"
    localcluster.register_node(kube, name)
    yield name
    cleanup_cluster_objects(kube, name)


def cpu(entry: dict[str, Any], aggregation: str) -> int:
    return slo.resource_map_from_api(entry["usage"][aggregation]).cpu


def test_first_report_after_kill_and_restart_has_the_5m_aggregates(
    kube: rest.Rest, control_plane: controlplane.ControlPlane, node_name: str, tmp_path: Path
) -> None:
    """kill -9, restart: the first report has 5m/10m data incl. the killed run's samples."""
    cache_path = tmp_path / "state" / "metriccache.db"
    cache_path.parent.mkdir()
    seed_cache(
        cache_path,
        seconds=360,
        node_cpu=HISTORY_CPU,
        node_memory=4 * GIB,
        system_cpu=HISTORY_CPU,
        system_memory=4 * GIB,
    )
    live = LiveNode(tmp_path, node_cpu=FIRST_RUN_CPU)
    with AgentProcess(
        tmp_path, control_plane.kubeconfig, live, node_name, cache_path=cache_path
    ) as first_run:
        started = time.time()
        first = wait_for_report(kube, node_name)
        # already on its first start, thanks to the history in the file
        assert first["status"]["nodeMetric"]["aggregatedNodeUsages"][0]["usage"] != EMPTY_USAGE
        deadline = time.monotonic() + 180
        while (
            time.time() < started + FIRST_RUN_SECONDS
            or (first_run.metric("nodeqos_agent_collect_rounds_total") or 0) < FIRST_RUN_ROUNDS
        ):
            assert time.monotonic() < deadline, "the first run made too few collection rounds"
            time.sleep(0.2)
        assert first_run.kill9() == -signal.SIGKILL
        killed = time.time()
    live.set_node_cpu(HISTORY_CPU)
    with AgentProcess(
        tmp_path, control_plane.kubeconfig, live, node_name, cache_path=cache_path
    ) as second_run:
        restarted = time.time()
        after = wait_for_report(kube, node_name, after=first["status"]["updateTime"])
        published = time.time()
        assert second_run.terminate() == 0, second_run.log()[-3000:]

    assert published - restarted < 15, "the first report comes seconds after the start"
    node = after["status"]["nodeMetric"]
    for key in ("aggregatedNodeUsages", "aggregatedSystemUsages"):
        five, ten, thirty = node[key]
        assert (five["duration"], ten["duration"], thirty["duration"]) == ("5m0s", "10m0s", "30m0s")
        assert five["usage"] != EMPTY_USAGE and ten["usage"] != EMPTY_USAGE
        assert thirty["usage"] == EMPTY_USAGE  # 6 min cover less than half of 30
    five = node["aggregatedNodeUsages"][0]
    # the killed run's 3-core samples survived SIGKILL: they are the top of the window
    assert cpu(five, "p99") == pytest.approx(FIRST_RUN_CPU * 1000, rel=0.05)
    assert HISTORY_CPU * 1000 < cpu(five, "avg") < FIRST_RUN_CPU * 1000
    assert cpu(five, "p50") == pytest.approx(HISTORY_CPU * 1000, rel=0.05)

    # and directly in the file: the killed run's samples, up to its last flush
    cache = MetricCache.open(cache_path, kinds=agent_kinds.registry(), flush_interval=None)
    try:
        kept = cache.aggregate(kinds.NODE_CPU_USAGE, {}, started + 1, killed - 5)
    finally:
        cache.close()
    assert kept is not None and kept.count >= 20
    assert kept.avg == pytest.approx(FIRST_RUN_CPU, rel=0.05)
