"""Standalone pod discovery: scan kubepods every N rounds, reuse resolved paths in between."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent import discovery
from cgroups import CgroupVersion, Driver, PodUID, QoSLevel
from kube import classify
from tests.agent.builders import UID_B, UID_BE, UID_G, scenario_a_pods
from tests.cgroupfs_builder import fake_pod, write_pod_tree

NEW_UID = "44444444-4444-4444-4444-444444444444"


def test_new_pods_appear_at_the_next_rescan(tmp_path: Path) -> None:
    """A pod created after a scan is read from the N-th round on, not before."""
    tree = write_pod_tree(tmp_path, CgroupVersion.V2, Driver.SYSTEMD, scenario_a_pods())
    source = discovery.StandaloneDiscovery(tree.fs, rescan_every=3)
    assert {t.uid for t in source.targets()} == {UID_G, UID_B, UID_BE}
    tree.add_pod(fake_pod(NEW_UID))
    assert NEW_UID not in {t.uid for t in source.targets()}  # round 1
    assert NEW_UID not in {t.uid for t in source.targets()}  # round 2
    assert NEW_UID in {t.uid for t in source.targets()}  # round 3: rescan


def test_unchanged_pods_keep_their_resolved_targets(tmp_path: Path) -> None:
    """A rescan reuses the PodTarget (and its path strings) of a pod that did not change."""
    tree = write_pod_tree(tmp_path, CgroupVersion.V1, Driver.CGROUPFS, scenario_a_pods())
    source = discovery.StandaloneDiscovery(tree.fs, rescan_every=1)
    first = {t.uid: t for t in source.targets()}
    second = {t.uid: t for t in source.targets()}
    assert all(second[uid] is first[uid] for uid in first)


def test_v1_paths_point_into_each_subsystem(tmp_path: Path) -> None:
    """On v1 usage is cpuacct's, throttling cpu's and memory memory's."""
    tree = write_pod_tree(tmp_path, CgroupVersion.V1, Driver.CGROUPFS, scenario_a_pods())
    target = discovery.StandaloneDiscovery(tree.fs).targets()[0]
    root = tree.root
    rel = target.files.rel_dir
    assert target.files.cpu_usage == str(root / "cpuacct" / rel / "cpuacct.usage")
    assert target.files.cpu_stat == str(root / "cpu" / rel / "cpu.stat")
    assert target.files.memory_stat == str(root / "memory" / rel / "memory.stat")


def test_forget_drops_a_pod_until_it_is_found_again(tmp_path: Path) -> None:
    """forget() stops reading a pod; rescan_soon() makes the next round look again."""
    tree = write_pod_tree(tmp_path, CgroupVersion.V2, Driver.SYSTEMD, scenario_a_pods())
    source = discovery.StandaloneDiscovery(tree.fs, rescan_every=100)
    source.targets()
    source.forget(PodUID(UID_B))
    assert UID_B not in {t.uid for t in source.targets()}
    source.rescan_soon()
    assert UID_B in {t.uid for t in source.targets()}  # its cgroup still exists


@pytest.mark.parametrize(
    ("uid", "qos", "priority"),
    [
        (UID_G, classify.KoordQOS.LSR, classify.PriorityClass.PROD),
        (UID_B, classify.KoordQOS.LS, classify.PriorityClass.PROD),
        (UID_BE, classify.KoordQOS.BE, classify.PriorityClass.BATCH),
    ],
    ids=["guaranteed", "burstable", "besteffort"],
)
def test_standalone_pod_meta(
    tmp_path: Path, uid: str, qos: classify.KoordQOS, priority: classify.PriorityClass
) -> None:
    """QoS and priority follow Koordinator's defaults for the kubelet QoS level; name is the UID."""
    tree = write_pod_tree(tmp_path, CgroupVersion.V2, Driver.SYSTEMD, scenario_a_pods())
    source = discovery.StandaloneDiscovery(tree.fs)
    source.targets()
    meta = source.pod_metas()[uid]
    assert (meta.name, meta.namespace, meta.qos, meta.priority) == (
        uid,
        discovery.STANDALONE_NAMESPACE,
        qos,
        priority,
    )


def test_rescan_every_must_be_positive(tmp_path: Path) -> None:
    """Zero rounds between scans is refused."""
    tree = write_pod_tree(tmp_path, CgroupVersion.V2, Driver.SYSTEMD)
    with pytest.raises(ValueError, match="rescan_every"):
        discovery.StandaloneDiscovery(tree.fs, rescan_every=0)


def test_no_kubepods_means_no_pods(tmp_path: Path) -> None:
    """A machine without kubelet yields no targets and no error."""
    tree = write_pod_tree(tmp_path, CgroupVersion.V2, Driver.CGROUPFS)
    tree.remove(tree.kubepods_dir(QoSLevel.GUARANTEED))
    assert list(discovery.StandaloneDiscovery(tree.fs).targets()) == []
