"""CgroupReconcile (memory QoS per class) and SystemConfig (sysctls within safe bounds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cgroups import CgroupVersion, Driver, QoSLevel
from metriccache import MetricCache
from qosmanager import Evictor, Handle, QoSMetrics, ResourceExecutor
from qosmanager.plugins.cgreconcile import CgroupReconcile
from qosmanager.plugins.sysconfig import SystemConfig, settings
from tests.cgroupfs_builder import FakeCgroupTree, fake_pod, write_pod_tree
from tests.qosmanager.builders import (
    BE,
    GI,
    LS,
    FakeClock,
    FakeEvictionAPI,
    FakeStates,
    make_node,
    make_pod,
    make_slo,
    pod_meta,
    pod_uid,
)

LS_POD = fake_pod(pod_uid("web"), qos=QoSLevel.BURSTABLE)
BE_POD = fake_pod(pod_uid("batch"), qos=QoSLevel.BESTEFFORT)
MEMORY_QOS = {
    "enable": True,
    "minLimitPercent": 100,
    "lowLimitPercent": 50,
    "throttlingPercent": 80,
}


def handle(
    tree: FakeCgroupTree, metrics: QoSMetrics, clock: FakeClock, sysctl: Path | None = None
) -> Handle:
    executor = ResourceExecutor(tree.fs, metrics=metrics, clock=clock, sysctl_root=sysctl)
    return Handle(
        fs=tree.fs,
        executor=executor,
        metrics=metrics,
        clock=clock,
        evictor=Evictor(FakeEvictionAPI(), metrics=metrics, clock=clock),
    )


def reconcile_env(
    tmp_path: Path,
    version: CgroupVersion,
    cache: MetricCache,
    clock: FakeClock,
    metrics: QoSMetrics,
) -> tuple[FakeCgroupTree, CgroupReconcile, FakeStates]:
    tree = write_pod_tree(tmp_path, version, Driver.SYSTEMD, [LS_POD, BE_POD])
    states = FakeStates(
        node_value=make_node(),
        pod_list=[
            pod_meta(make_pod("web", qos=LS, memory="1Gi", memory_limit="2Gi"), Driver.SYSTEMD),
            pod_meta(make_pod("batch", qos=BE), Driver.SYSTEMD),
        ],
        slo=make_slo(resourceQOSStrategy={"lsClass": {"memoryQOS": MEMORY_QOS}}),
    )
    plugin = CgroupReconcile(handle(tree, metrics, clock))
    plugin.setup(None, cache, states)  # type: ignore[arg-type]
    return tree, plugin, states


def read(tree: FakeCgroupTree, rel: object, name: str) -> str:
    return tree.fs.path(rel, name).read_text().strip()  # type: ignore[arg-type]


def test_memory_qos_per_class_with_hierarchical_protection(
    tmp_path: Path, cache: MetricCache, clock: FakeClock, metrics: QoSMetrics
) -> None:
    """LS pod: min = request, low = half, high = 80% of the limit (page-aligned); parents sum."""
    tree, plugin, _ = reconcile_env(tmp_path, CgroupVersion.V2, cache, clock, metrics)
    plugin.tick()
    web = tree.pod_dir(LS_POD)
    assert read(tree, web, "memory.min") == str(GI)
    assert read(tree, web, "memory.low") == str(GI // 2)
    assert read(tree, web, "memory.high") == str(2 * GI * 80 // 100 // 4096 * 4096)
    for parent in (web.parent, web.parent.parent):  # burstable slice, kubepods root
        assert read(tree, parent, "memory.min") == str(GI)
    batch = tree.pod_dir(BE_POD)
    assert (read(tree, batch, "memory.min"), read(tree, batch, "memory.high")) == ("0", "max")


def test_memory_qos_is_undone_when_the_class_is_disabled(
    tmp_path: Path, cache: MetricCache, clock: FakeClock, metrics: QoSMetrics
) -> None:
    """Turning lsClass.memoryQOS off resets the pod and its parents once."""
    tree, plugin, states = reconcile_env(tmp_path, CgroupVersion.V2, cache, clock, metrics)
    plugin.tick()
    states.slo = make_slo()
    clock.advance(1)
    plugin.tick()
    web = tree.pod_dir(LS_POD)
    assert [read(tree, web, f) for f in ("memory.min", "memory.low", "memory.high")] == [
        "0",
        "0",
        "max",
    ]
    assert read(tree, web.parent.parent, "memory.min") == "0"


def test_memory_qos_does_nothing_on_v1(
    tmp_path: Path, cache: MetricCache, clock: FakeClock, metrics: QoSMetrics
) -> None:
    """v1 has no memory.min/low/high: no write, no error."""
    tree, plugin, _ = reconcile_env(tmp_path, CgroupVersion.V1, cache, clock, metrics)
    before = read(tree, tree.pod_dir(LS_POD), "memory.limit_in_bytes")
    plugin.tick()
    assert read(tree, tree.pod_dir(LS_POD), "memory.limit_in_bytes") == before


def test_system_config_writes_safe_sysctls(
    tmp_path: Path, cache: MetricCache, clock: FakeClock, metrics: QoSMetrics
) -> None:
    """64Gi node, factor 100: min_free_kbytes 671088; watermark_scale_factor 150."""
    sysctl = tmp_path / "proc-sys"
    (sysctl / "vm").mkdir(parents=True)
    for name in ("min_free_kbytes", "watermark_scale_factor"):
        (sysctl / "vm" / name).write_text("67584\n")
    tree = write_pod_tree(tmp_path / "cg", CgroupVersion.V2, Driver.SYSTEMD)
    states = FakeStates(
        node_value=make_node(memory="64Gi"),
        slo=make_slo(systemStrategy={"minFreeKbytesFactor": 100, "watermarkScaleFactor": 150}),
    )
    plugin = SystemConfig(handle(tree, metrics, clock, sysctl))
    plugin.setup(None, cache, states)  # type: ignore[arg-type]
    plugin.tick()
    assert (sysctl / "vm" / "min_free_kbytes").read_text() == "671088"
    assert (sysctl / "vm" / "watermark_scale_factor").read_text() == "150"


@pytest.mark.parametrize(
    ("strategy", "memory", "expected"),
    [
        pytest.param({}, 64 * GI, [], id="unset-fields-left-alone"),
        pytest.param({"minFreeKbytesFactor": 1}, GI // 2, [], id="min-free-too-small"),
        pytest.param({"minFreeKbytesFactor": 2000}, 1024 * GI, [], id="min-free-too-large"),
        pytest.param({"watermarkScaleFactor": 5}, 64 * GI, [], id="watermark-too-small"),
        pytest.param(
            {"watermarkScaleFactor": 10},
            64 * GI,
            [("vm/watermark_scale_factor", 10)],
            id="watermark-lowest-safe",
        ),
    ],
)
def test_system_config_refuses_unsafe_values(
    strategy: dict[str, int], memory: int, expected: list[tuple[str, int]]
) -> None:
    """min_free_kbytes in [10 MiB, 10 GiB] (KiB), watermark_scale_factor in [10, 400]."""
    spec = make_slo(systemStrategy=strategy).system_strategy
    assert [(s.name, s.value) for s in settings(spec, memory)] == expected
