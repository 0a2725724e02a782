"""Node CPU and memory from /proc, node PSI, and system usage = node - pods - host apps."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from agent.collectors import HostApp, HostAppCollector, Reason, Round, system_usage
from cgroups import CgroupVersion, Driver
from metriccache import kinds
from tests.agent.builders import HZ, SCENARIO_A_MEMORY, run_scenario_a, scenario_a_pods
from tests.agent.conftest import MakeHost
from tests.cgroupfs_builder import CgroupValues, fake_pod, write_pod_tree

GIB_KB = 1024 * 1024
PODS_MEMORY = sum(sum(m.values()) for m in SCENARIO_A_MEMORY.values())


def test_node_cpu_is_busy_ticks_over_wall_time(host_factory: MakeHost) -> None:
    """user+nice+system+irq+softirq ticks grow by 1.5 s in 1 s: 1.5 cores."""
    host = host_factory(CgroupVersion.V2, Driver.SYSTEMD, scenario_a_pods())
    host.round()
    host.step(1.0)
    host.add_busy_ticks(3 * HZ // 2)
    host.ticks.idle += 10 * HZ  # idle time does not count
    host.write_proc()
    host.round()
    assert host.last(kinds.NODE_CPU_USAGE) == pytest.approx(1.5)


def test_node_memory_is_total_minus_available(host_factory: MakeHost) -> None:
    """MemTotal 16 GiB, MemAvailable 12 GiB: 4 GiB used."""
    host = host_factory(
        CgroupVersion.V2, Driver.SYSTEMD, (), total_kb=16 * GIB_KB, available_kb=12 * GIB_KB
    )
    host.round()
    assert host.last(kinds.NODE_MEMORY_USAGE) == 4 << 30


def test_system_usage_is_node_minus_pods(host_factory: MakeHost) -> None:
    """Node 1.5 cores and 4 GiB, pods 0.75 cores and their working sets: the rest is system."""
    host = host_factory(
        CgroupVersion.V2, Driver.SYSTEMD, scenario_a_pods(), available_kb=12 * GIB_KB
    )
    run_scenario_a(host, node_busy_cores=1.5)
    assert host.last(kinds.SYSTEM_CPU_USAGE) == pytest.approx(0.75)
    assert host.last(kinds.SYSTEM_MEMORY_USAGE) == (4 << 30) - PODS_MEMORY


def test_system_usage_is_floored_at_zero(host_factory: MakeHost) -> None:
    """Pods measured above the node (sampling skew) give system 0, never negative."""
    host = host_factory(
        CgroupVersion.V1, Driver.CGROUPFS, scenario_a_pods(), available_kb=16 * GIB_KB
    )
    run_scenario_a(host, node_busy_cores=0.5)
    assert host.last(kinds.SYSTEM_CPU_USAGE) == 0.0
    assert host.last(kinds.SYSTEM_MEMORY_USAGE) == 0


def test_no_system_cpu_while_a_pod_rate_is_unknown(host_factory: MakeHost) -> None:
    """A pod's first round (no rate yet) skips system CPU rather than charging it to the system."""
    host = host_factory(CgroupVersion.V2, Driver.SYSTEMD, scenario_a_pods())
    run_scenario_a(host)
    assert host.last(kinds.SYSTEM_CPU_USAGE) is not None
    host.tree.add_pod(fake_pod("44444444-4444-4444-4444-444444444444"))
    host.agent.source.rescan_soon()
    host.step(1.0)
    host.round()
    assert host.last(kinds.SYSTEM_CPU_USAGE) is None
    assert host.last(kinds.SYSTEM_MEMORY_USAGE) is not None


@pytest.mark.parametrize(
    ("round_values", "expected"),
    [
        pytest.param({}, (0.25, 100), id="complete"),
        pytest.param({"pods_cpu_complete": False}, (None, 100), id="pod-rate-unknown"),
        pytest.param({"host_apps_complete": False}, (None, 100), id="host-app-rate-unknown"),
        pytest.param({"node_cpu_cores": None}, (None, 100), id="no-node-cpu"),
        pytest.param({"node_memory_bytes": None}, (0.25, None), id="no-node-memory"),
        pytest.param({"pods_cpu_cores": 5.0, "pods_memory_bytes": 900}, (0.0, 0), id="floored"),
    ],
)
def test_system_usage_rules(
    round_values: dict[str, object], expected: tuple[object, object]
) -> None:
    """system = node - pods - host apps, floored at 0, unknown when an input is unknown."""
    values: dict[str, object] = {
        "node_cpu_cores": 2.0,
        "node_memory_bytes": 1000,
        "pods_cpu_cores": 1.5,
        "pods_memory_bytes": 600,
        "host_apps_cpu_cores": 0.25,
        "host_apps_memory_bytes": 300,
    }
    values.update(round_values)
    rnd = Round(index=1, time=0.0, monotonic=0.0, **values)  # type: ignore[arg-type]
    assert system_usage(rnd) == expected


def test_host_apps_are_read_from_their_cgroups(tmp_path: Path) -> None:
    """A host application's CPU rate and working set; a missing one is counted and skipped."""
    tree = write_pod_tree(tmp_path, CgroupVersion.V2, Driver.SYSTEMD)
    app_dir = PurePosixPath("system.slice/sshd.service")
    tree.write_values(app_dir, CgroupValues(inactive_anon=1 << 20, active_anon=2 << 20))
    lost: list[tuple[str, Reason]] = []
    collector = HostAppCollector(
        tree.fs,
        [HostApp("sshd", app_dir), HostApp("gone", PurePosixPath("system.slice/gone.service"))],
        lambda name, reason: lost.append((name, reason)),
    )
    first = Round(index=0, time=10.0, monotonic=10.0)
    collector.collect(first)
    tree.advance_cpu(app_dir, 200_000_000)
    second = Round(index=1, time=11.0, monotonic=11.0)
    collector.collect(second)
    assert second.host_apps_cpu_cores == pytest.approx(0.2)
    assert second.host_apps_memory_bytes == 3 << 20
    assert not second.host_apps_complete  # "gone" could not be read
    assert lost == [("hostapps", Reason.GONE)] * 2
    by_kind = {s.kind.name: s.value for s in second.samples if s.labels == {"app": "sshd"}}
    assert by_kind == {"host_app_memory_usage": 3 << 20, "host_app_cpu_usage": pytest.approx(0.2)}


def test_node_psi_comes_from_proc_pressure(host_factory: MakeHost) -> None:
    """/proc/pressure/* avg10 for some and full lines; cpu without a full line is fine."""
    host = host_factory(CgroupVersion.V1, Driver.CGROUPFS, ())
    pressure = host.proc_root / "pressure"
    pressure.mkdir()
    (pressure / "cpu").write_text("some avg10=7.50 avg60=1.00 avg300=0.10 total=9\n")
    (pressure / "memory").write_text(
        "some avg10=1.25 avg60=0.00 avg300=0.00 total=1\nfull avg10=0.75 avg60=0.00 avg300=0.00 total=1\n"
    )
    (pressure / "io").write_text(
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )
    host.round()
    assert host.last(kinds.NODE_PSI, resource="cpu", kind="some") == 7.5
    assert host.last(kinds.NODE_PSI, resource="cpu", kind="full") is None
    assert host.last(kinds.NODE_PSI, resource="memory", kind="full") == 0.75
    assert host.last(kinds.NODE_PSI, resource="io", kind="some") == 0.0


def test_no_psi_in_the_kernel_is_not_an_error(host_factory: MakeHost) -> None:
    """Without /proc/pressure the PSI collector stores nothing and counts nothing."""
    host = host_factory(CgroupVersion.V2, Driver.SYSTEMD, ())
    host.round()
    assert host.last(kinds.NODE_PSI, resource="cpu", kind="some") is None
    assert host.errors("psi", "gone") == 0
