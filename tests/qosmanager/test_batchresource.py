"""BatchResource: Batch pods' cgroups from batch-cpu/batch-memory (rules, fake v1/v2 trees, events)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import cgroups
from cgroups import CgroupVersion, Driver, QoSLevel
from metriccache import MetricCache
from qosmanager import Evictor, Handle, PodMeta, QoSMetrics, ResourceExecutor
from qosmanager.plugins.batchresource import BatchResource, rules, targets
from tests.cgroupfs_builder import FakeCgroupTree, FakePod, fake_container, fake_pod, write_pod_tree
from tests.qosmanager.builders import (
    GI,
    LS,
    FakeClock,
    FakeEvictionAPI,
    FakeStates,
    make_batch_pod,
    make_node,
    make_pod,
    make_slo,
    pod_meta,
    pod_uid,
)

MI = 1 << 20
NO_QUOTA = rules.QuotaRule()


def meta(obj: dict[str, Any], driver: Driver = Driver.CGROUPFS) -> PodMeta:
    return pod_meta(obj, driver)


# -- rules -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("milli", "shares"),
    [
        pytest.param(0, 2, id="none-is-minimum"),
        pytest.param(1, 2, id="below-minimum"),
        pytest.param(500, 512, id="half-cpu"),
        pytest.param(1000, 1024, id="one-cpu"),
        pytest.param(10**6, 262144, id="capped"),
    ],
)
def test_milli_cpu_to_shares(milli: int, shares: int) -> None:
    """Shares are 1024 per CPU, within [2, 262144]; no request gives the minimum."""
    assert rules.milli_cpu_to_shares(milli) == shares


@pytest.mark.parametrize(
    ("milli", "quota"),
    [
        pytest.param(0, None, id="zero-unlimited"),
        pytest.param(-1, None, id="negative-unlimited"),
        pytest.param(5, 1000, id="raised-to-minimum"),
        pytest.param(1500, 150_000, id="one-and-a-half-cpu"),
    ],
)
def test_milli_cpu_to_quota(milli: int, quota: int | None) -> None:
    """Quota is 100 µs per millicore of a 100 ms period, at least 1000 µs; 0 means unlimited."""
    assert rules.milli_cpu_to_quota(milli) == quota


def test_pod_values_sum_the_containers() -> None:
    """Pod shares, quota and memory are the sums of its containers' batch values."""
    pod = meta(
        make_batch_pod(
            "b",
            batch_cpu=[("500", "1000"), ("1500", "2000")],
            batch_memory=[(None, "1Gi"), (None, "512Mi")],
        )
    )
    spec = rules.batch_spec(pod)
    assert spec is not None
    assert rules.pod_values(spec, NO_QUOTA) == rules.CgroupValues(2048, 300_000, GI + 512 * MI)
    assert rules.container_values(spec["c1"], NO_QUOTA) == rules.CgroupValues(
        1536, 200_000, 512 * MI
    )


def test_one_unlimited_container_leaves_the_pod_unlimited() -> None:
    """A container without a batch-cpu or batch-memory limit makes the pod's quota or memory unlimited."""
    pod = meta(
        make_batch_pod(
            "b",
            batch_cpu=[("500", "1000"), ("500", None)],
            batch_memory=[(None, "1Gi"), (None, None)],
        )
    )
    spec = rules.batch_spec(pod)
    assert spec is not None
    assert rules.pod_values(spec, NO_QUOTA) == rules.CgroupValues(1024, None, None)
    assert rules.container_values(spec["c1"], NO_QUOTA) == rules.CgroupValues(512, None, None)


def test_memory_limit_is_page_aligned() -> None:
    """A batch-memory limit that is not a whole number of pages is rounded down, as the kernel does."""
    pod = meta(make_batch_pod("b", batch_memory=[(None, str(GI + 100))]))
    spec = rules.batch_spec(pod)
    assert spec is not None
    assert rules.container_values(spec["c0"], NO_QUOTA).memory_limit == GI


@pytest.mark.parametrize(
    ("slo", "annotation", "quota"),
    [
        pytest.param({}, None, 200_000, id="default"),
        pytest.param(
            {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}},
            None,
            None,
            id="suppress-by-quota-unsets",
        ),
        pytest.param(
            {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cpuset"}},
            None,
            200_000,
            id="suppress-by-cpuset-keeps",
        ),
        pytest.param({}, "1.5", 133_334, id="normalization-ratio-scales-up-rounding"),
        pytest.param({}, "0.8", 200_000, id="ratio-below-one-ignored"),
        pytest.param({}, "garbage", 200_000, id="malformed-ratio-ignored"),
    ],
)
def test_quota_rule(slo: dict[str, Any], annotation: str | None, quota: int | None) -> None:
    """Suppression by cfsQuota unsets Batch quotas; a normalization ratio > 1 divides them."""
    annotations = {rules.ANNOTATION_CPU_NORMALIZATION_RATIO: annotation} if annotation else {}
    rule = rules.quota_rule(make_slo(**slo), make_node(annotations=annotations))
    spec = rules.batch_spec(meta(make_batch_pod("b")))
    assert spec is not None
    assert rules.container_values(spec["c0"], rule).cfs_quota_us == quota


def test_spec_from_annotation_when_containers_name_none() -> None:
    """Without batch resources in the spec, the extended-resource-spec annotation is used."""
    obj = make_pod("b", qos="BE", labels={"koordinator.sh/qosClass": "BE"})
    obj["metadata"]["annotations"][rules.ANNOTATION_EXTENDED_RESOURCE_SPEC] = json.dumps(
        {
            "containers": {
                "c0": {
                    "requests": {"kubernetes.io/batch-cpu": "1k"},
                    "limits": {"kubernetes.io/batch-cpu": "1k"},
                }
            }
        }
    )
    found = targets(meta(obj), NO_QUOTA)
    assert found is not None
    assert [v.cfs_quota_us for _, v in found] == [100_000, 100_000]


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(
            make_batch_pod("b", labels={"koordinator.sh/qosClass": "LS"}), id="not-labelled-be"
        ),
        pytest.param(
            make_pod("b", qos="BE", labels={"koordinator.sh/qosClass": "BE"}),
            id="no-batch-resources",
        ),
        pytest.param(make_batch_pod("b", phase="Succeeded"), id="finished"),
        pytest.param(make_pod("web", qos=LS), id="ls-pod"),
    ],
)
def test_pods_left_alone(obj: dict[str, Any]) -> None:
    """Only active pods labelled BE that name a batch resource are Batch pods."""
    assert targets(meta(obj), NO_QUOTA) is None


# -- the strategy on fake trees -------------------------------------------------------

TREES = [
    pytest.param(CgroupVersion.V1, Driver.CGROUPFS, id="v1-cgroupfs"),
    pytest.param(CgroupVersion.V1, Driver.SYSTEMD, id="v1-systemd"),
    pytest.param(CgroupVersion.V2, Driver.CGROUPFS, id="v2-cgroupfs"),
    pytest.param(CgroupVersion.V2, Driver.SYSTEMD, id="v2-systemd"),
]


def fake_be_pod(name: str, containers: int = 1) -> FakePod:
    uid = pod_uid(name)
    return fake_pod(
        uid,
        qos=QoSLevel.BESTEFFORT,
        cpu_shares=2,
        containers=[
            fake_container(f"{uid.replace('-', '')}{i:02d}", cpu_shares=2)
            for i in range(containers)
        ],
    )


def new_handle(tree: FakeCgroupTree, metrics: QoSMetrics, clock: Callable[[], float]) -> Handle:
    return Handle(
        fs=tree.fs,
        executor=ResourceExecutor(tree.fs, metrics=metrics, clock=clock),
        metrics=metrics,
        clock=clock,
        evictor=Evictor(FakeEvictionAPI(), metrics=metrics, clock=clock),
    )


def read(tree: FakeCgroupTree, rel: object, name: str) -> str:
    return tree.fs.path(rel, name).read_text().strip()  # type: ignore[arg-type]


def cpu_files(tree: FakeCgroupTree, rel: object) -> tuple[str, str, str]:
    """(shares or weight, quota or cpu.max, memory limit) as the files say."""
    if tree.fs.version is CgroupVersion.V1:
        names = ("cpu.shares", "cpu.cfs_quota_us", "memory.limit_in_bytes")
    else:
        names = ("cpu.weight", "cpu.max", "memory.max")
    return read(tree, rel, names[0]), read(tree, rel, names[1]), read(tree, rel, names[2])


@pytest.mark.parametrize(("version", "driver"), TREES)
def test_tick_sets_pod_and_container_cgroups(
    tmp_path: Path,
    version: CgroupVersion,
    driver: Driver,
    cache: MetricCache,
    clock: FakeClock,
    metrics: QoSMetrics,
) -> None:
    """Two containers: each gets its own values, the pod their sums, in each version's files."""
    fake = fake_be_pod("batch", containers=2)
    tree = write_pod_tree(tmp_path, version, driver, [fake])
    obj = make_batch_pod(
        "batch",
        batch_cpu=[("500", "1000"), ("1500", "2000")],
        batch_memory=[(None, "1Gi"), (None, "512Mi")],
    )
    states = FakeStates(node_value=make_node(), pod_list=[pod_meta(obj, driver)])
    plugin = BatchResource(new_handle(tree, metrics, clock))
    plugin.setup(None, cache, states)  # type: ignore[arg-type]
    plugin.tick()
    pod, c0, c1 = tree.pod_dir(fake), *(tree.container_dir(fake, c) for c in fake.containers)
    if version is CgroupVersion.V1:
        assert cpu_files(tree, pod) == ("2048", "300000", str(GI + 512 * MI))
        assert cpu_files(tree, c0) == ("512", "100000", str(GI))
        assert cpu_files(tree, c1) == ("1536", "200000", str(512 * MI))
    else:  # weight = 1 + (shares - 2) * 9999 // 262142
        assert cpu_files(tree, pod) == ("79", "300000 100000", str(GI + 512 * MI))
        assert cpu_files(tree, c0) == ("20", "100000 100000", str(GI))
        assert cpu_files(tree, c1) == ("59", "200000 100000", str(512 * MI))


@pytest.mark.parametrize(("version", "driver"), TREES[::3])
def test_quota_unset_when_suppression_uses_cfs_quota(
    tmp_path: Path,
    version: CgroupVersion,
    driver: Driver,
    cache: MetricCache,
    clock: FakeClock,
    metrics: QoSMetrics,
) -> None:
    """NodeSLO BE suppression by cfsQuota: the quota set before is lifted (shares and memory stay)."""
    fake = fake_be_pod("batch")
    tree = write_pod_tree(tmp_path, version, driver, [fake])
    states = FakeStates(
        node_value=make_node(), pod_list=[pod_meta(make_batch_pod("batch"), driver)]
    )
    plugin = BatchResource(new_handle(tree, metrics, clock))
    plugin.setup(None, cache, states)  # type: ignore[arg-type]
    plugin.tick()
    states.slo = make_slo(
        resourceUsedThresholdWithBE={"enable": True, "cpuSuppressPolicy": "cfsQuota"}
    )
    clock.advance(1)
    plugin.tick()
    unlimited = "-1" if version is CgroupVersion.V1 else "max 100000"
    container = tree.container_dir(fake, fake.containers[0])
    assert cpu_files(tree, container)[1] == unlimited
    assert cpu_files(tree, tree.pod_dir(fake))[1] == unlimited
    assert cpu_files(tree, container)[2] == str(GI)


def test_container_set_once_it_appears(
    tmp_path: Path, cache: MetricCache, clock: FakeClock, metrics: QoSMetrics
) -> None:
    """Before kubelet reports the container only the pod is set; the next round sets the container."""
    fake = fake_be_pod("batch")
    tree = write_pod_tree(tmp_path, CgroupVersion.V2, Driver.SYSTEMD, [fake])
    states = FakeStates(
        node_value=make_node(),
        pod_list=[pod_meta(make_batch_pod("batch", running=False), Driver.SYSTEMD)],
    )
    plugin = BatchResource(new_handle(tree, metrics, clock))
    plugin.setup(None, cache, states)  # type: ignore[arg-type]
    plugin.tick()
    container = tree.container_dir(fake, fake.containers[0])
    assert cpu_files(tree, tree.pod_dir(fake))[1] == "200000 100000"
    assert cpu_files(tree, container)[1] == "max 100000"
    states.pod_list = [pod_meta(make_batch_pod("batch"), Driver.SYSTEMD)]
    plugin.tick()
    assert cpu_files(tree, container)[1] == "200000 100000"


def test_a_vanished_or_refusing_pod_does_not_stop_the_others(
    tmp_path: Path, cache: MetricCache, clock: FakeClock, metrics: QoSMetrics
) -> None:
    """A pod whose cgroup is gone and one whose file is unreadable are skipped; the third is set."""
    gone, broken, fine = fake_be_pod("gone"), fake_be_pod("broken"), fake_be_pod("fine")
    tree = write_pod_tree(tmp_path, CgroupVersion.V1, Driver.CGROUPFS, [gone, broken, fine])
    tree.remove(tree.pod_dir(gone))
    tree.fs.path(tree.pod_dir(broken), "memory.limit_in_bytes").write_text("garbage\n")
    states = FakeStates(
        node_value=make_node(),
        pod_list=[pod_meta(make_batch_pod(n)) for n in ("gone", "broken", "fine")],
    )
    plugin = BatchResource(new_handle(tree, metrics, clock))
    plugin.setup(None, cache, states)  # type: ignore[arg-type]
    plugin.tick()
    assert cpu_files(tree, tree.pod_dir(fine)) == ("1024", "200000", str(GI))
    assert read(tree, tree.pod_dir(broken), "cpu.cfs_quota_us") == "200000"


def test_lowering_a_limit_on_v1_shrinks_containers_first(
    tmp_path: Path, cache: MetricCache, clock: FakeClock, metrics: QoSMetrics
) -> None:
    """Quota writes keep v1's child <= parent rule: a cut is written container first, then pod."""
    fake = fake_be_pod("batch")
    tree = write_pod_tree(tmp_path, CgroupVersion.V1, Driver.CGROUPFS, [fake])
    states = FakeStates(node_value=make_node(), pod_list=[pod_meta(make_batch_pod("batch"))])
    written: list[str] = []
    handle = new_handle(tree, metrics, clock)

    def recording(fs: Any, rel: Any, resource: Any, value: Any) -> bool:
        changed = cgroups.write(fs, rel, resource, value)
        if changed and resource.name == "CPU_QUOTA":
            written.append(f"{'pod' if rel == tree.pod_dir(fake) else 'container'}={value}")
        return changed

    handle = Handle(
        fs=tree.fs,
        executor=ResourceExecutor(tree.fs, metrics=metrics, clock=clock, writer=recording),
        metrics=metrics,
        clock=clock,
        evictor=handle.evictor,
    )
    plugin = BatchResource(handle)
    plugin.setup(None, cache, states)  # type: ignore[arg-type]
    plugin.tick()
    states.pod_list = [pod_meta(make_batch_pod("batch", batch_cpu=[("500", "500")]))]
    plugin.tick()
    assert written == ["container=200000", "pod=200000", "container=50000", "pod=50000"]


# -- event-driven runs -----------------------------------------------------------------


class EventStates(FakeStates):
    """FakeStates that also implements `PodEvents`, as the agent's informer does."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._cond = threading.Condition()
        self._version = 0

    @property
    def pods_version(self) -> int:
        return self._version

    def wait_pods_changed(self, since: int, timeout: float) -> int:
        with self._cond:
            self._cond.wait_for(lambda: self._version != since, timeout)
            return self._version

    def replace(self, pods: list[PodMeta]) -> None:
        with self._cond:
            self.pod_list = pods
            self._version += 1
            self._cond.notify_all()


@pytest.fixture
def running() -> Iterator[list[threading.Thread]]:
    threads: list[threading.Thread] = []
    yield threads
    for thread in threads:
        thread.join(10)


def test_pod_event_sets_cgroups_without_waiting_for_the_interval(
    tmp_path: Path, cache: MetricCache, metrics: QoSMetrics, running: list[threading.Thread]
) -> None:
    """With a one-hour interval, a new Batch pod's cgroups are set after its pod event."""
    fake = fake_be_pod("batch")
    tree = write_pod_tree(tmp_path, CgroupVersion.V2, Driver.SYSTEMD, [fake])
    states = EventStates(node_value=make_node())
    plugin = BatchResource(new_handle(tree, metrics, time.time), interval=3600)
    plugin.setup(None, cache, states)  # type: ignore[arg-type]
    stop = threading.Event()
    thread = threading.Thread(target=plugin.run, args=(stop,), daemon=True)
    running.append(thread)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while plugin.rounds < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert plugin.rounds == 1
        states.replace([pod_meta(make_batch_pod("batch"), Driver.SYSTEMD)])
        container = tree.container_dir(fake, fake.containers[0])
        # the round the event wakes ends with every file of the pod written (cpu, then memory)
        while plugin.rounds < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert plugin.rounds == 2
        assert cpu_files(tree, container) == ("39", "200000 100000", str(GI))
    finally:
        stop.set()


def test_a_refusing_cgroup_is_warned_about_once(
    tmp_path: Path,
    cache: MetricCache,
    clock: FakeClock,
    metrics: QoSMetrics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A file that keeps failing logs one warning, then debug lines, round after round."""
    broken = fake_be_pod("broken")
    tree = write_pod_tree(tmp_path, CgroupVersion.V1, Driver.CGROUPFS, [broken])
    tree.fs.path(tree.pod_dir(broken), "memory.limit_in_bytes").write_text("garbage\n")
    states = FakeStates(node_value=make_node(), pod_list=[pod_meta(make_batch_pod("broken"))])
    plugin = BatchResource(new_handle(tree, metrics, clock))
    plugin.setup(None, cache, states)  # type: ignore[arg-type]
    with caplog.at_level("DEBUG", logger="qosmanager.plugins.batchresource.plugin"):
        for _ in range(3):
            clock.advance(61)
            plugin.tick()
    levels = [r.levelname for r in caplog.records if "MEMORY_LIMIT not set" in r.getMessage()]
    assert levels == ["WARNING", "DEBUG", "DEBUG"]
