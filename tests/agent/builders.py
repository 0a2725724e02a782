"""Builders for the agent tests: a hand-driven clock and an assembled agent on a fake host.

    host = make_host(tmp_path, CgroupVersion.V2, Driver.SYSTEMD, pods=[...])
    host.round()                       # first round: levels, no rates yet
    host.step(1.0)                     # the clock moves on one second
    host.tree.advance_cpu(host.tree.pod_dir(pod), 500_000_000)
    host.round()
    assert host.last(kinds.POD_CPU_USAGE, pod_uid=pod.uid) == 0.5

The agent is built by `agent.assembly.assemble`, the same path the CLI
takes (cgroup detection included), with the fake clock and no flusher thread.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from agent import assembly, config, features
from agent.collectors import Round
from cgroups import CgroupVersion, Driver, QoSLevel
from metriccache import MetricKind
from tests.cgroupfs_builder import (
    FakeCgroupTree,
    FakePod,
    fake_container,
    fake_pod,
    write_meminfo,
    write_pod_tree,
    write_proc_stat,
)

HZ = os.sysconf("SC_CLK_TCK")  # what ProcFS divides /proc/stat ticks by
T0 = 1_700_000_000.0
MONO0 = 5_000.0

UID_G = "11111111-1111-1111-1111-111111111111"
UID_B = "22222222-2222-2222-2222-222222222222"
UID_BE = "33333333-3333-3333-3333-333333333333"


class FakeClock:
    """Wall and monotonic time that move only when a test says so."""

    def __init__(self, wall: float = T0, mono: float = MONO0) -> None:
        self.wall = wall
        self.mono = mono

    def time(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds

    def wait(self, seconds: float) -> bool:
        """A Ticker `wait` that sleeps by moving the clock; never asks to stop."""
        self.advance(seconds)
        return False


@dataclass
class ProcTicks:
    """The aggregate /proc/stat counters the fake host reports (USER_HZ ticks)."""

    user: int = 10_000
    system: int = 5_000
    idle: int = 100_000


@dataclass
class FakeHost:
    """An agent assembled over a fake cgroup tree and /proc, driven by hand."""

    tree: FakeCgroupTree
    proc_root: Path
    clock: FakeClock
    registry: CollectorRegistry
    agent: assembly.Agent
    ticks: ProcTicks

    def round(self) -> Round:
        """Run one collection round."""
        return self.agent.collection.run_round()

    def step(self, seconds: float = 1.0) -> None:
        """Move the clock."""
        self.clock.advance(seconds)

    def add_busy_ticks(self, ticks: int) -> None:
        """Make the node busier: `ticks` more user ticks in /proc/stat."""
        self.ticks.user += ticks
        self.write_proc()

    def write_proc(self) -> None:
        write_proc_stat(
            self.proc_root, user=self.ticks.user, system=self.ticks.system, idle=self.ticks.idle
        )

    def last(self, metric: MetricKind, /, **labels: str) -> float | None:
        """The value of the series at the current clock time, None without a sample now."""
        now = self.clock.time()
        agg = self.agent.cache.aggregate(metric, labels, now, now)
        return None if agg is None else agg.last

    def errors(self, collector: str, reason: str) -> float:
        """nodeqos_agent_collector_errors_total{collector, reason}."""
        value = self.registry.get_sample_value(
            "nodeqos_agent_collector_errors_total", {"collector": collector, "reason": reason}
        )
        return value or 0.0

    def close(self) -> None:
        self.agent.close()


def make_host(
    tmp_path: Path,
    version: CgroupVersion,
    driver: Driver,
    pods: Iterable[FakePod] = (),
    *,
    total_kb: int = 16 * 1024 * 1024,
    available_kb: int = 12 * 1024 * 1024,
    gates: str = "",
    node_usage: config.NodeUsageSource = config.NodeUsageSource.PROC,
    **tree_options: Any,
) -> FakeHost:
    """A fake host with `pods`, /proc/stat and /proc/meminfo, and the agent over it
    (measuring the node as `node_usage` says)."""
    tree = write_pod_tree(tmp_path / "cgroup", version, driver, pods, **tree_options)
    proc_root = tmp_path / "proc"
    ticks = ProcTicks()
    write_proc_stat(proc_root, user=ticks.user, system=ticks.system, idle=ticks.idle)
    write_meminfo(proc_root, total_kb=total_kb, available_kb=available_kb)
    cfg = config.AgentConfig(
        node_name="node-a",
        cgroup_root=tree.root,
        proc_root=proc_root,
        metric_cache_path=tmp_path / "state" / "metriccache.db",
        metrics_addr=None,
        feature_gates=features.parse(gates),
        node_usage_source=node_usage,
        standalone=True,
    )
    clock = FakeClock()
    registry = CollectorRegistry()
    agent = assembly.assemble(cfg, registry, clock, flush_interval=None)
    return FakeHost(tree, proc_root, clock, registry, agent, ticks)


# -- scenarios A1/A2 (shared/SCENARIOS.md) ------------------------------------------
# pod uid -> (cpu growth in µs over the 1 s between the samples, memory.stat values)
SCENARIO_A_CPU_US = {UID_G: 500_000, UID_B: 250_000, UID_BE: 0}
SCENARIO_A_MEMORY: dict[str, dict[str, Any]] = {
    UID_G: {"inactive_anon": 100 << 20, "active_anon": 200 << 20, "unevictable": 1 << 20},
    UID_B: {"inactive_anon": 30 << 20, "active_anon": 50 << 20, "unevictable": 0},
    UID_BE: {"inactive_anon": 4 << 20, "active_anon": 6 << 20, "unevictable": 2 << 20},
}
# Page cache must not count: every cgroup also reports file pages.
_FILE_PAGES: dict[str, Any] = {"inactive_file": 500 << 20, "active_file": 700 << 20}
SCENARIO_A_QOS = {
    UID_G: QoSLevel.GUARANTEED,
    UID_B: QoSLevel.BURSTABLE,
    UID_BE: QoSLevel.BESTEFFORT,
}


def container_id(uid: str) -> str:
    """The one container of a scenario pod."""
    return f"c{uid[:8]}{'0' * 56}"


def scenario_a_pods() -> list[FakePod]:
    """Guaranteed, Burstable and BestEffort pods with one container each."""
    return [
        fake_pod(
            uid,
            qos=SCENARIO_A_QOS[uid],
            cpu_usage_ns=40_000_000_000,
            **SCENARIO_A_MEMORY[uid],
            **_FILE_PAGES,
            containers=[
                fake_container(
                    container_id(uid),
                    cpu_usage_ns=30_000_000_000,
                    **SCENARIO_A_MEMORY[uid],
                    **_FILE_PAGES,
                )
            ],
        )
        for uid in SCENARIO_A_CPU_US
    ]


def run_scenario_a(host: FakeHost, *, node_busy_cores: float = 0.0) -> None:
    """Two rounds 1 s apart; in between each pod and container uses its CPU share
    and the node's busy ticks grow by `node_busy_cores` seconds."""
    host.round()
    host.step(1.0)
    host.add_busy_ticks(round(node_busy_cores * HZ))
    for pod in scenario_a_pods():
        grown = SCENARIO_A_CPU_US[pod.uid] * 1000
        host.tree.advance_cpu(host.tree.pod_dir(pod), grown)
        host.tree.advance_cpu(host.tree.container_dir(pod, pod.containers[0]), grown)
    host.round()
