"""The resource executor: v1/v2 mapping, last-value cache, leveled writes, one owner per tick."""

from __future__ import annotations

import errno
from pathlib import Path, PurePosixPath

import pytest
from prometheus_client import CollectorRegistry

import cgroups
from cgroups import CgroupVersion, Driver, QoSLevel, Resource
from qosmanager import ClaimRefused, QoSMetrics, ResourceExecutor
from tests.cgroupfs_builder import FakeCgroupTree, fake_container, fake_pod, write_pod_tree
from tests.qosmanager.builders import FakeClock

V1, V2 = CgroupVersion.V1, CgroupVersion.V2
POD = fake_pod(
    "0000aaaa-1111-2222-3333-444455556666",
    qos=QoSLevel.BURSTABLE,
    cpu_quota_us=200_000,
    cpuset_cpus="0-1",
    containers=[fake_container("abc", cpu_quota_us=200_000, cpuset_cpus="0-1")],
)


def tree_of(
    tmp_path: Path, version: CgroupVersion
) -> tuple[FakeCgroupTree, PurePosixPath, PurePosixPath]:
    tree = write_pod_tree(tmp_path, version, Driver.CGROUPFS, [POD])
    return tree, tree.pod_dir(POD), tree.container_dir(POD, POD.containers[0])


class KernelRules:
    """A writer that enforces cgroup v1's hierarchy rules on a fake tree and records writes.

    A child's cfs quota may not exceed its parent's, and a cpuset must lie inside
    its parent's (kernel `tg_cfs_schedulable_down`, cpuset `validate_change`).
    """

    def __init__(self) -> None:
        self.writes: list[tuple[str, object]] = []

    def __call__(
        self,
        fs: cgroups.CgroupFS,
        rel_dir: cgroups.RelDir,
        resource: Resource,
        value: cgroups.ResourceValue,
    ) -> bool:
        rel = PurePosixPath(rel_dir)
        if resource is Resource.CPU_QUOTA and isinstance(value, int):
            parent = cgroups.read_cpu_max(fs, rel.parent).quota_us
            children = [cgroups.read_cpu_max(fs, c).quota_us for c in self._children(fs, rel)]
            if (parent is not None and value > parent) or any(
                c is not None and c > value for c in children
            ):
                raise cgroups.WriteRejected(
                    rel, str(value), OSError(errno.EINVAL, "Invalid argument")
                )
        if (
            resource is Resource.CPUSET_CPUS
            and isinstance(value, frozenset)
            and not value <= cgroups.read_cpuset_cpus(fs, rel.parent)
        ):
            raise cgroups.WriteRejected(rel, str(value), OSError(errno.EINVAL, "Invalid argument"))
        self.writes.append((rel.name, value))
        return cgroups.write(fs, rel_dir, resource, value)

    @staticmethod
    def _children(fs: cgroups.CgroupFS, rel: PurePosixPath) -> list[PurePosixPath]:
        path = fs.dir(rel, subsystem="cpu")
        return [rel / p.name for p in path.iterdir() if p.is_dir()]


def executor(
    tree: FakeCgroupTree, metrics: QoSMetrics, clock: FakeClock, **kwargs: object
) -> ResourceExecutor:
    return ResourceExecutor(tree.fs, metrics=metrics, clock=clock, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("version", "resource", "value", "filename", "content"),
    [
        pytest.param(V1, Resource.CPU_QUOTA, 50_000, "cpu.cfs_quota_us", "50000", id="v1-quota"),
        pytest.param(V2, Resource.CPU_QUOTA, 50_000, "cpu.max", "50000 100000", id="v2-quota"),
        pytest.param(V1, Resource.CPU_SHARES, 2048, "cpu.shares", "2048", id="v1-shares"),
        pytest.param(V2, Resource.CPU_SHARES, 2048, "cpu.weight", "79", id="v2-weight"),
        pytest.param(V1, Resource.CPU_BURST, 10_000, "cpu.cfs_burst_us", "10000", id="v1-burst"),
        pytest.param(V2, Resource.CPU_BURST, 10_000, "cpu.max.burst", "10000", id="v2-burst"),
        pytest.param(
            V1,
            Resource.MEMORY_LIMIT,
            1 << 30,
            "memory.limit_in_bytes",
            "1073741824",
            id="v1-memory",
        ),
        pytest.param(
            V2, Resource.MEMORY_LIMIT, 2 << 30, "memory.max", "2147483648", id="v2-memory-max"
        ),
    ],
)
def test_maps_logical_resources_to_each_versions_file(
    tmp_path: Path,
    metrics: QoSMetrics,
    clock: FakeClock,
    version: CgroupVersion,
    resource: Resource,
    value: cgroups.ResourceValue,
    filename: str,
    content: str,
) -> None:
    """One logical write lands in the version's file with the version's units."""
    tree, pod, _ = tree_of(tmp_path, version)
    assert executor(tree, metrics, clock).update("test", pod, resource, value) is True
    assert tree.fs.path(pod, filename).read_text().strip() == content


def test_cache_skips_rewrites_until_forced(
    tmp_path: Path, metrics: QoSMetrics, clock: FakeClock
) -> None:
    """A cached value is not re-read; after force_rewrite_seconds drift is found and fixed."""
    tree, pod, _ = tree_of(tmp_path, V1)
    ex = executor(tree, metrics, clock, force_rewrite_seconds=60.0)
    quota_file = tree.fs.path(pod, "cpu.cfs_quota_us")
    assert ex.update("test", pod, Resource.CPU_QUOTA, 150_000) is True
    quota_file.write_text("999999\n")  # kubelet (or a human) changes it behind our back
    clock.advance(30)
    assert ex.update("test", pod, Resource.CPU_QUOTA, 150_000) is False
    assert quota_file.read_text().strip() == "999999"
    clock.advance(31)
    assert ex.update("test", pod, Resource.CPU_QUOTA, 150_000) is True
    assert quota_file.read_text().strip() == "150000"


def test_read_before_write_reports_unchanged(
    tmp_path: Path, metrics: QoSMetrics, clock: FakeClock, registry: CollectorRegistry
) -> None:
    """Writing the value already in the file changes nothing and is not counted as an update."""
    tree, pod, _ = tree_of(tmp_path, V2)
    ex = executor(tree, metrics, clock)
    assert ex.update("test", pod, Resource.CPU_QUOTA, 200_000) is False
    labels = {"resource": "cpu_quota"}
    assert registry.get_sample_value("nodeqos_agent_resource_updates_total", labels) is None
    assert (
        registry.get_sample_value("nodeqos_agent_resource_update_duration_seconds_count", labels)
        == 1
    )


def test_leveled_raise_loosens_the_parent_first(
    tmp_path: Path, metrics: QoSMetrics, clock: FakeClock
) -> None:
    """Raising pod and container quota: pod loosened, then container, under v1's rules."""
    tree, pod, container = tree_of(tmp_path, V1)
    rules = KernelRules()
    ex = executor(tree, metrics, clock, writer=rules)
    with pytest.raises(cgroups.WriteRejected):  # the naive order breaks the v1 rule
        ex.update("test", container, Resource.CPU_QUOTA, 300_000)
    rules.writes.clear()
    ex.update_leveled("test", Resource.CPU_QUOTA, [[(pod, 300_000)], [(container, 300_000)]])
    assert rules.writes == [(pod.name, 300_000), (container.name, 300_000)]
    assert cgroups.read_cpu_max(tree.fs, container).quota_us == 300_000


def test_leveled_shrink_goes_bottom_up(
    tmp_path: Path, metrics: QoSMetrics, clock: FakeClock
) -> None:
    """Lowering both quotas: the container shrinks before its pod."""
    tree, pod, container = tree_of(tmp_path, V1)
    rules = KernelRules()
    ex = executor(tree, metrics, clock, writer=rules)
    assert (
        ex.update_leveled("test", Resource.CPU_QUOTA, [[(pod, 100_000)], [(container, 80_000)]])
        == 2
    )
    assert rules.writes == [(container.name, 80_000), (pod.name, 100_000)]


def test_leveled_cpuset_uses_the_union_on_the_way_down(
    tmp_path: Path, metrics: QoSMetrics, clock: FakeClock
) -> None:
    """Moving {0,1} to {2,3}: parent widened to {0..3}, child set, parent narrowed."""
    tree, pod, container = tree_of(tmp_path, V1)
    tree.update(pod.parent, cpuset_cpus="0-3")
    rules = KernelRules()
    ex = executor(tree, metrics, clock, writer=rules)
    new = frozenset({2, 3})
    ex.update_leveled("test", Resource.CPUSET_CPUS, [[(pod, new)], [(container, new)]])
    assert rules.writes == [
        (pod.name, frozenset({0, 1, 2, 3})),
        (container.name, new),
        (pod.name, new),
    ]


def test_leveled_skips_a_vanished_cgroup(
    tmp_path: Path, metrics: QoSMetrics, clock: FakeClock
) -> None:
    """A container removed meanwhile is skipped; its pod is still written."""
    tree, pod, container = tree_of(tmp_path, V2)
    tree.remove(container)
    ex = executor(tree, metrics, clock)
    assert (
        ex.update_leveled("test", Resource.CPU_QUOTA, [[(pod, 300_000)], [(container, 300_000)]])
        == 1
    )
    assert cgroups.read_cpu_max(tree.fs, pod).quota_us == 300_000


def test_second_owner_in_the_same_tick_is_refused_and_counted(
    tmp_path: Path, metrics: QoSMetrics, clock: FakeClock, registry: CollectorRegistry
) -> None:
    """One owner per file per tick: B's write is refused while A holds the file."""
    tree, pod, _ = tree_of(tmp_path, V2)
    ex = executor(tree, metrics, clock, tick_seconds=1.0)
    ex.update("CPUBurst", pod, Resource.CPU_QUOTA, 250_000)
    with pytest.raises(ClaimRefused, match="owned by CPUBurst"):
        ex.update("CPUSuppress", pod, Resource.CPU_QUOTA, 100_000)
    assert cgroups.read_cpu_max(tree.fs, pod).quota_us == 250_000
    assert (
        registry.get_sample_value(
            "nodeqos_agent_resource_update_conflicts_total",
            {"owner": "CPUSuppress", "resource": "cpu_quota"},
        )
        == 1
    )
    ex.update("CPUBurst", pod, Resource.CPU_QUOTA, 260_000)  # the owner may write again
    clock.advance(1.0)  # next tick: the claim has ended
    ex.update("CPUSuppress", pod, Resource.CPU_QUOTA, 100_000)
    assert cgroups.read_cpu_max(tree.fs, pod).quota_us == 100_000


def test_refused_leveled_batch_writes_nothing(
    tmp_path: Path, metrics: QoSMetrics, clock: FakeClock
) -> None:
    """A batch claims all its files first: one taken file refuses the whole batch."""
    tree, pod, container = tree_of(tmp_path, V2)
    ex = executor(tree, metrics, clock)
    ex.update("A", container, Resource.CPU_QUOTA, 150_000)
    with pytest.raises(ClaimRefused):
        ex.update_leveled("B", Resource.CPU_QUOTA, [[(pod, 400_000)], [(container, 400_000)]])
    assert cgroups.read_cpu_max(tree.fs, pod).quota_us == 200_000


def test_other_resources_of_a_file_are_separate_claims(
    tmp_path: Path, metrics: QoSMetrics, clock: FakeClock
) -> None:
    """Owning a pod's quota does not block another strategy from its memory limit."""
    tree, pod, _ = tree_of(tmp_path, V2)
    ex = executor(tree, metrics, clock)
    ex.update("A", pod, Resource.CPU_QUOTA, 150_000)
    assert ex.update("B", pod, Resource.MEMORY_LIMIT, 1 << 30) is True


def test_vanished_cgroup_raises_gone_and_is_forgotten(
    tmp_path: Path, metrics: QoSMetrics, clock: FakeClock
) -> None:
    """A pod that went away raises CgroupGone; a later pod with the same path is written again."""
    tree, pod, _ = tree_of(tmp_path, V2)
    ex = executor(tree, metrics, clock)
    ex.update("test", pod, Resource.CPU_QUOTA, 150_000)
    tree.remove(pod)
    with pytest.raises(cgroups.CgroupGone):
        ex.update("test", pod, Resource.CPU_QUOTA, 160_000)
    tree.add_pod(POD)
    assert ex.update("test", pod, Resource.CPU_QUOTA, 150_000) is True


def test_sysctl_writes_under_the_injected_root(
    tmp_path: Path, metrics: QoSMetrics, clock: FakeClock
) -> None:
    """Sysctls are read before written, cached, and a missing one is Unsupported."""
    tree, _, _ = tree_of(tmp_path / "cg", V2)
    sysctl = tmp_path / "proc-sys"
    (sysctl / "vm").mkdir(parents=True)
    (sysctl / "vm" / "watermark_scale_factor").write_text("10\n")
    ex = executor(tree, metrics, clock, sysctl_root=sysctl)
    assert ex.update_sysctl("SystemConfig", "vm/watermark_scale_factor", 150) is True
    assert (sysctl / "vm" / "watermark_scale_factor").read_text() == "150"
    assert ex.update_sysctl("SystemConfig", "vm/watermark_scale_factor", 150) is False
    with pytest.raises(cgroups.Unsupported):
        ex.update_sysctl("SystemConfig", "vm/no_such_knob", 1)


def test_values_of_vanished_cgroups_are_forgotten(
    tmp_path: Path, metrics: QoSMetrics, clock: FakeClock
) -> None:
    """Cache entries not rewritten for two force periods are pruned (bounded memory)."""
    tree, pod, container = tree_of(tmp_path, V2)
    calls: list[str] = []

    def counting(
        fs: cgroups.CgroupFS, rel: cgroups.RelDir, res: Resource, value: cgroups.ResourceValue
    ) -> bool:
        calls.append(str(rel))
        return cgroups.write(fs, rel, res, value)

    ex = executor(tree, metrics, clock, writer=counting, force_rewrite_seconds=60.0)
    ex.update("test", container, Resource.CPU_QUOTA, 150_000)
    for _ in range(3):  # only the pod keeps being reconciled
        clock.advance(61)
        ex.update("test", pod, Resource.CPU_QUOTA, 150_000)
    calls.clear()
    ex.update("test", container, Resource.CPU_QUOTA, 150_000)
    assert calls == [str(container)]  # re-read: the old entry was pruned
