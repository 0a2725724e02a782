"""The round runner: isolation of a broken collector, timing, readiness."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

import cgroups
from agent import health, telemetry
from agent.collection import Collection
from agent.collectors import NodeCollector, Round
from metriccache import MetricCache, kinds
from tests.agent.builders import FakeClock
from tests.cgroupfs_builder import write_meminfo, write_proc_stat


class Broken:
    """A collector with a bug."""

    name = "broken"

    def __init__(self) -> None:
        self.fail = True

    def collect(self, rnd: Round) -> None:
        if self.fail:
            raise RuntimeError("bug")


@dataclass
class Parts:
    collection: Collection
    broken: Broken
    registry: CollectorRegistry
    readiness: health.Readiness
    cache: MetricCache


@pytest.fixture
def parts(tmp_path: Path) -> Parts:
    write_proc_stat(tmp_path, user=100, idle=100)
    write_meminfo(tmp_path, total_kb=1000, available_kb=400)
    registry = CollectorRegistry()
    metrics = telemetry.AgentMetrics(registry, build_version="test")
    readiness = health.Readiness()
    clock = FakeClock()
    cache = MetricCache(clock=clock.time)
    broken = Broken()
    node = NodeCollector(cgroups.ProcFS(tmp_path), metrics.errors)
    collection = Collection([broken, node], cache, clock, metrics, readiness)
    return Parts(collection, broken, registry, readiness, cache)


def test_a_crashing_collector_is_isolated(parts: Parts) -> None:
    """A collector raising is counted reason="internal"; the next collector still runs."""
    rnd = parts.collection.run_round()
    labels = {"collector": "broken", "reason": "internal"}
    assert parts.registry.get_sample_value("nodeqos_agent_collector_errors_total", labels) == 1
    memory = parts.cache.aggregate(kinds.NODE_MEMORY_USAGE, {}, rnd.time, rnd.time)
    assert memory is not None and memory.last == 600 * 1024


def test_every_collector_is_timed(parts: Parts) -> None:
    """Each round observes one duration per collector, failed or not."""
    parts.collection.run_round()
    parts.collection.run_round()
    for name in ("broken", "node"):
        count = parts.registry.get_sample_value(
            "nodeqos_agent_collect_duration_seconds_count", {"collector": name}
        )
        assert count == 2
    assert parts.registry.get_sample_value("nodeqos_agent_collect_rounds_total") == 2


def test_collector_turns_ready_after_first_good_round(parts: Parts) -> None:
    """Not ready while rounds fail; ready after the first clean round, and it stays ready."""
    parts.collection.run_round()
    assert not parts.readiness.snapshot()["collector"].ready
    parts.broken.fail = False
    parts.collection.run_round()
    assert parts.readiness.snapshot()["collector"].ready
    parts.broken.fail = True
    parts.collection.run_round()
    state = parts.readiness.snapshot()["collector"]
    assert state.ready and "failure" in state.detail
