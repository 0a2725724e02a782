"""The best-effort QoS group: its CPU usage, CFS quota and cpuset."""

from __future__ import annotations

import pytest

from agent import kinds as agent_kinds
from cgroups import CgroupVersion, Driver, QoSLevel
from metriccache import kinds
from tests.agent.conftest import MakeHost

TREES = [
    pytest.param(CgroupVersion.V2, Driver.SYSTEMD, id="v2-systemd"),
    pytest.param(CgroupVersion.V1, Driver.CGROUPFS, id="v1-cgroupfs"),
]


@pytest.mark.parametrize(("version", "driver"), TREES)
def test_be_usage_is_the_group_counter_rate(
    host_factory: MakeHost, version: CgroupVersion, driver: Driver
) -> None:
    """The besteffort group's usage counter grows 1.2 s in 1 s: 1.2 cores."""
    host = host_factory(version, driver)
    be_dir = host.tree.kubepods_dir(QoSLevel.BESTEFFORT)
    host.round()
    host.step(1.0)
    host.tree.advance_cpu(be_dir, 1_200_000_000)
    host.round()
    assert host.last(kinds.BE_CPU_USAGE) == pytest.approx(1.2)


@pytest.mark.parametrize(
    ("quota_us", "cpuset", "granted", "cpus"),
    [
        pytest.param(150_000, "0-3", 1.5, 4, id="quota-below-cpuset"),
        pytest.param(800_000, "0-1", 2.0, 2, id="cpuset-caps-quota"),
        pytest.param(None, "0,2,4", 3.0, 3, id="no-quota-cpuset-only"),
    ],
)
@pytest.mark.parametrize(("version", "driver"), TREES)
def test_be_quota_and_cpuset(
    host_factory: MakeHost,
    version: CgroupVersion,
    driver: Driver,
    quota_us: int | None,
    cpuset: str,
    granted: float,
    cpus: int,
) -> None:
    """be_cpu_quota is the grant (quota/period capped by the cpuset); be_cpuset_cpus its size."""
    host = host_factory(version, driver)
    be_dir = host.tree.kubepods_dir(QoSLevel.BESTEFFORT)
    host.tree.update(be_dir, cpu_quota_us=quota_us, cpu_period_us=100_000, cpuset_cpus=cpuset)
    host.round()
    assert host.last(kinds.BE_CPU_QUOTA) == granted
    assert host.last(agent_kinds.BE_CPUSET_CPUS) == cpus


def test_missing_be_group_is_not_an_error(host_factory: MakeHost) -> None:
    """A machine without kubelet has no besteffort group: nothing stored, nothing counted."""
    host = host_factory(CgroupVersion.V2, Driver.SYSTEMD)
    host.tree.remove(host.tree.kubepods_dir(QoSLevel.BESTEFFORT))
    host.round()
    host.step(1.0)
    host.round()
    assert host.last(kinds.BE_CPU_USAGE) is None
    assert host.last(kinds.BE_CPU_QUOTA) is None
    assert host.errors("besteffort", "gone") == 0
