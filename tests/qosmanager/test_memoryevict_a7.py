"""Scenario A7: BE pods evicted for node memory, lowest priority then largest, down to 68%.

Pod memory comes from fake v1 and v2 cgroup trees read the way the agent's
collector does (working set without page cache from memory.stat), so the
scenario runs on both hierarchies.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from cgroups import CgroupVersion, Driver, QoSLevel, read_memory_stat
from kube import eviction
from metriccache import MetricCache, Sample, kinds
from qosmanager import Evictor, Handle, QoSMetrics, ResourceExecutor
from qosmanager.plugins.memoryevict import MemoryEvict, select
from tests.cgroupfs_builder import fake_pod, write_pod_tree
from tests.qosmanager.builders import (
    BE,
    GI,
    LS,
    FakeClock,
    FakeEvictionAPI,
    FakeStates,
    make_node,
    make_pod,
    names,
    node_sample,
    pod_meta,
    pod_uid,
    thresholds,
)

# name -> (Koordinator QoS, spec.priority, memory working set)
PODS = {
    "free-3g": (BE, 3000, 3 * GI),
    "free-2g": (BE, 3000, 2 * GI),
    "batch-8g": (BE, 5500, 8 * GI),
    "batch-1g": (BE, 5500, 1 * GI),
    "ls-20g": (LS, 0, 20 * GI),  # lowest priority and largest, but LS: never touched
}
CAPACITY = 64 * GI
LOWER_BYTES = CAPACITY * 68 // 100  # 43.52Gi


def a7_pods() -> list[dict[str, object]]:
    return [make_pod(n, qos=q, priority=p) for n, (q, p, _) in PODS.items()]


def collect_memory(tmp_path: Path, version: CgroupVersion, cache: MetricCache, t: float) -> None:
    """Pod memory from a fake cgroup tree, as the agent's collector reads it."""
    fakes = {
        n: fake_pod(
            pod_uid(n), qos=QoSLevel.BESTEFFORT if q == BE else QoSLevel.BURSTABLE, active_anon=mem
        )
        for n, (q, _, mem) in PODS.items()
    }
    tree = write_pod_tree(tmp_path, version, Driver.SYSTEMD, fakes.values())
    cache.append(
        Sample(
            kinds.POD_MEMORY_USAGE,
            {"pod_uid": pod_uid(n)},
            t,
            read_memory_stat(tree.fs, tree.pod_dir(f)).working_set_without_cache,
        )
        for n, f in fakes.items()
    )


def plugin_with(
    api: FakeEvictionAPI, cache: MetricCache, clock: FakeClock, metrics: QoSMetrics, tmp_path: Path
) -> tuple[MemoryEvict, FakeStates]:
    tree = write_pod_tree(tmp_path / "unused", CgroupVersion.V2, Driver.SYSTEMD)
    evictor = Evictor(api, metrics=metrics, clock=clock)
    handle = Handle(
        fs=tree.fs,
        executor=ResourceExecutor(tree.fs, metrics=metrics, clock=clock),
        evictor=evictor,
        metrics=metrics,
        clock=clock,
    )
    states = FakeStates(
        node_value=make_node(memory="64Gi"),
        pod_list=[pod_meta(p) for p in a7_pods()],  # type: ignore[arg-type]
        slo=thresholds(memoryEvictThresholdPercent=70),
    )
    plugin = MemoryEvict(handle)
    plugin.setup(None, cache, states)  # type: ignore[arg-type]
    return plugin, states


def test_release_target_is_usage_above_the_lower_watermark() -> None:
    """48Gi of 64Gi (75% >= 70%): release down to 68% = 43.52Gi, i.e. 4.48Gi."""
    need = select.to_release(48 * GI, CAPACITY, 70, 68)
    assert need == 48 * GI - LOWER_BYTES
    assert need / GI == pytest.approx(4.48)
    assert select.to_release(44 * GI, CAPACITY, 70, 68) == 0  # 68.75% < 70%


def test_selection_is_lowest_priority_then_largest_and_never_ls() -> None:
    """Candidates: free-3g, free-2g, batch-8g, batch-1g; 5Gi from the first two covers 4.48Gi."""
    memory = {pod_uid(n): float(mem) for n, (_, _, mem) in PODS.items()}
    ordered = select.candidates([pod_meta(p) for p in a7_pods()], memory)  # type: ignore[arg-type]
    assert names(ordered) == ["free-3g", "free-2g", "batch-8g", "batch-1g"]
    chosen = select.select(ordered, select.to_release(48 * GI, CAPACITY, 70, 68))
    assert names(chosen) == ["free-3g", "free-2g"]
    assert 48 * GI - sum(c.memory for c in chosen) <= LOWER_BYTES


@pytest.mark.parametrize("version", [CgroupVersion.V1, CgroupVersion.V2], ids=["v1", "v2"])
def test_a7_evicts_exactly_enough_through_the_evictor(
    version: CgroupVersion,
    tmp_path: Path,
    cache: MetricCache,
    clock: FakeClock,
    metrics: QoSMetrics,
    registry: CollectorRegistry,
) -> None:
    """A7 on v1 and v2: free-3g and free-2g are evicted, with Events; 43Gi projected."""
    api = FakeEvictionAPI()
    plugin, _ = plugin_with(api, cache, clock, metrics, tmp_path)
    cache.append([node_sample(kinds.NODE_MEMORY_USAGE, clock.now, 48 * GI)])
    collect_memory(tmp_path / "tree", version, cache, clock.now)
    plugin.tick()
    assert api.calls == ["free-3g", "free-2g"]
    assert api.events == [("free-3g", "Warning", "Evicted"), ("free-2g", "Warning", "Evicted")]
    assert (
        registry.get_sample_value("nodeqos_agent_pod_evictions_total", {"reason": "BEMemoryEvict"})
        == 2
    )


def test_pdb_protected_pod_is_skipped_for_the_next(
    tmp_path: Path, cache: MetricCache, clock: FakeClock, metrics: QoSMetrics
) -> None:
    """free-3g is PDB-blocked: free-2g and batch-8g are evicted instead (10Gi >= 4.48Gi)."""
    api = FakeEvictionAPI({"free-3g": eviction.Outcome.PDB_BLOCKED})
    plugin, _ = plugin_with(api, cache, clock, metrics, tmp_path)
    cache.append([node_sample(kinds.NODE_MEMORY_USAGE, clock.now, 48 * GI)])
    collect_memory(tmp_path / "tree", CgroupVersion.V2, cache, clock.now)
    plugin.tick()
    assert api.calls == ["free-3g", "free-2g", "batch-8g"]


def test_cool_down_between_eviction_rounds(
    tmp_path: Path, cache: MetricCache, clock: FakeClock, metrics: QoSMetrics
) -> None:
    """After evicting, the strategy waits 4 s before acting again, even if memory stays high."""
    api = FakeEvictionAPI()
    plugin, states = plugin_with(api, cache, clock, metrics, tmp_path)
    calls_per_round = []
    for _ in range(3):
        cache.append([node_sample(kinds.NODE_MEMORY_USAGE, clock.now, 52 * GI)])
        collect_memory(tmp_path / f"tree{clock.now}", CgroupVersion.V2, cache, clock.now)
        plugin.tick()
        calls_per_round.append(list(api.calls))
        api.calls.clear()
        states.pod_list = [p for p in states.pod_list if p.name not in calls_per_round[-1]]
        clock.advance(2.0)
    # 52Gi needs 8.48Gi: three pods at once; 2 s later the cool-down holds; 4 s later, the rest
    assert calls_per_round == [["free-3g", "free-2g", "batch-8g"], [], ["batch-1g"]]


@pytest.mark.parametrize(
    ("slo", "usage"),
    [
        pytest.param(
            thresholds(memoryEvictThresholdPercent=70, enable=False), 48 * GI, id="nodeslo-disabled"
        ),
        pytest.param(thresholds(memoryEvictThresholdPercent=70), 44 * GI, id="below-threshold"),
    ],
)
def test_no_eviction_when_disabled_or_below_threshold(
    tmp_path: Path,
    cache: MetricCache,
    clock: FakeClock,
    metrics: QoSMetrics,
    slo: object,
    usage: int,
) -> None:
    """The NodeSLO switch and the threshold both hold evictions back."""
    api = FakeEvictionAPI()
    plugin, states = plugin_with(api, cache, clock, metrics, tmp_path)
    states.slo = slo  # type: ignore[assignment]
    cache.append([node_sample(kinds.NODE_MEMORY_USAGE, clock.now, usage)])
    collect_memory(tmp_path / "tree", CgroupVersion.V2, cache, clock.now)
    plugin.tick()
    assert api.calls == []
