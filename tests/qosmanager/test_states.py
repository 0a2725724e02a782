"""Pod views for the plugins: cgroup directories, limits, pinned CPUs; node reservation."""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest

from cgroups import Driver
from kube import classify
from qosmanager.plugins.base import node_reserved
from tests.qosmanager.builders import BE, LS, LSR, make_node, make_pod, pod_meta, pod_uid

UID = pod_uid("web")


@pytest.mark.parametrize(
    ("driver", "qos", "pod_dir", "container"),
    [
        pytest.param(
            Driver.CGROUPFS,
            LS,
            f"kubepods/burstable/pod{UID}",
            f"{UID.replace('-', '')}00",
            id="cgroupfs-burstable",
        ),
        pytest.param(
            Driver.SYSTEMD,
            BE,
            f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID.replace('-', '_')}.slice",
            f"cri-containerd-{UID.replace('-', '')}00.scope",
            id="systemd-besteffort",
        ),
        pytest.param(
            Driver.SYSTEMD,
            LSR,
            f"kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice",
            f"cri-containerd-{UID.replace('-', '')}00.scope",
            id="systemd-guaranteed",
        ),
    ],
)
def test_pod_meta_knows_its_cgroup_directories(
    driver: Driver, qos: str, pod_dir: str, container: str
) -> None:
    """Pod and container directories follow kubelet's layout for the driver and QoS."""
    meta = pod_meta(make_pod("web", qos=qos), driver)
    assert meta.cgroup_dir == PurePosixPath(pod_dir)
    (c0,) = meta.containers
    assert c0.cgroup_dir == PurePosixPath(pod_dir) / container
    assert (c0.id, c0.running) == (f"{UID.replace('-', '')}00", True)


def test_pod_meta_classifies_and_sums_limits() -> None:
    """QoS, priority (0 by default) and limits summed over containers (None if one is unlimited)."""
    limited = pod_meta(make_pod("a", qos=LS, cpu_limit="2", memory_limit="1Gi", containers=2))
    assert (limited.qos, limited.priority) == (classify.KoordQOS.LS, 0)
    assert (limited.limit("cpu"), limited.limit("memory")) == (4000, 2 << 30)
    assert pod_meta(make_pod("b", qos=LS)).limit("cpu") is None


def test_pinned_cpus_come_from_the_resource_status_annotation() -> None:
    """koord-scheduler's cpuset annotation is read; a garbled one pins nothing."""
    key = "scheduling.koordinator.sh/resource-status"
    assert pod_meta(make_pod("p", annotations={key: '{"cpuset": "2-3,6"}'})).pinned_cpus() == {
        2,
        3,
        6,
    }
    assert pod_meta(make_pod("q", annotations={key: "{not json"})).pinned_cpus() == frozenset()


def test_node_reservation_is_the_larger_of_kubelet_and_annotation() -> None:
    """max(capacity - allocatable, node.koordinator.sh/reservation), whole CPUs for reservedCPUs."""
    assert node_reserved(make_node(cpu="16", allocatable_cpu="15500m")).cpu == 500
    annotated = make_node(
        cpu="16",
        allocatable_cpu="15500m",
        annotations={"node.koordinator.sh/reservation": '{"reservedCPUs": "0-1"}'},
    )
    assert node_reserved(annotated).cpu == 2000
