"""The daemon's loop: only the leader cycles, losing the lease stops cycles and controllers.

The elector is played by hand (`Leadership.started()` / `stopped()` are its
callbacks); the runner is a real one over a StaticSource (`fakes.harness`).
The real election between two processes is in test_leader_election.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from descheduler import framework
from descheduler.app import daemon, leader, telemetry
from descheduler.config import ExtensionPoint, PluginArgs
from descheduler.evictions import EvictOptions
from descheduler.framework import Handle, Reason, Snapshot
from kube import eviction, leaderelection
from tests import builders
from tests.descheduler import fakes
from tests.kube.fakelease import FakeClock, FakeLeaseApi
from tests.waiting import eventually


class Counting:
    """A balance plugin that counts its calls and is also a controller (`run(stop)`)."""

    instances: list[Counting] = []  # noqa: RUF012 (test bookkeeping, reset per test)

    def __init__(self, args: PluginArgs, handle: Handle) -> None:
        self.cycles = 0
        self.runs = 0
        self.stopped_runs = 0
        self.running = threading.Event()
        Counting.instances.append(self)

    def balance(self, snapshot: Snapshot) -> None:
        self.cycles += 1

    def run(self, stop: threading.Event) -> None:
        self.runs += 1
        self.running.set()
        stop.wait()
        self.running.clear()
        self.stopped_runs += 1


class FakeSource:
    """The informer side of the daemon: start/stop/synced, nothing behind it."""

    def __init__(self, synced: bool = True) -> None:
        self.synced = synced
        self.started = self.stopped = False

    def start(self) -> FakeSource:
        self.started = True
        return self

    def stop(self) -> None:
        self.stopped = True

    def state(self) -> Any:
        raise framework.SourceNotReady("caches not synced yet: pods")


@pytest.fixture
def counting() -> Iterator[None]:
    Counting.instances.clear()
    yield
    Counting.instances.clear()


def make_daemon(
    *, interval: timedelta, source: FakeSource | None = None, sync_timeout: float | None = None
) -> tuple[daemon.Daemon, leader.Leadership, CollectorRegistry]:
    registry = fakes.registry_with()
    registry.register(
        "Counting",
        Counting,
        args=fakes.NoArgs,
        extension_points=frozenset({ExtensionPoint.BALANCE}),
    )
    cluster = framework.StaticSource(nodes=fakes.nodes("n1", "n2"))
    h = fakes.harness(fakes.policy(balance=["Counting"]), registry, cluster)
    metrics = CollectorRegistry()
    leadership = leader.Leadership(telemetry.AppMetrics(metrics).leader)
    running = daemon.Daemon(
        runner=h.runner,
        source=source or FakeSource(),  # type: ignore[arg-type]
        leadership=leadership,
        registry=metrics,
        addresses=[],
        interval=interval,
        sync_timeout=sync_timeout,
        stopping=threading.Event(),
    )
    return running, leadership, metrics


def test_only_the_leader_cycles_and_losing_the_lease_stops_everything(counting: None) -> None:
    """A follower waits; a leader cycles and runs controllers; losing the lease stops both."""
    running, leadership, metrics = make_daemon(interval=timedelta(milliseconds=10))
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(running.run()), daemon=True)
    thread.start()
    (plugin,) = Counting.instances
    threading.Event().wait(0.2)
    assert (plugin.cycles, plugin.runs) == (0, 0), "a follower must not cycle"

    leadership.started()
    eventually(lambda: plugin.cycles >= 3, "cycles while leading")
    eventually(plugin.running.is_set, "the controller to start")
    assert metrics.get_sample_value("nodeqos_descheduler_leader") == 1

    leadership.stopped()
    eventually(lambda: plugin.stopped_runs == 1, "the controller to stop")
    after_loss = plugin.cycles
    threading.Event().wait(0.2)
    assert plugin.cycles <= after_loss + 1, "cycles went on after the lease was lost"
    assert metrics.get_sample_value("nodeqos_descheduler_leader") == 0

    leadership.started()  # leading again: a new term, a new controller run
    eventually(lambda: plugin.runs == 2 and plugin.cycles > after_loss + 1, "a new term")

    running.stop()
    thread.join(5)
    assert not thread.is_alive()
    assert result == [daemon.EXIT_OK]
    assert plugin.stopped_runs == 2


def test_zero_interval_runs_one_pass_and_exits(counting: None) -> None:
    """deschedulingInterval 0 (and --once): one cycle, then run() returns 0."""
    running, leadership, _ = make_daemon(interval=timedelta(0))
    leadership.started()
    reports: list[framework.CycleReport] = []
    assert running.run(reports.append) == daemon.EXIT_OK
    assert len(reports) == 1
    assert Counting.instances[0].cycles == 1


def test_once_gives_up_when_caches_never_sync(counting: None) -> None:
    """--once waits for the caches a bounded time, then exits 1."""
    source = FakeSource(synced=False)
    running, leadership, _ = make_daemon(interval=timedelta(0), source=source, sync_timeout=0.2)
    leadership.started()
    assert running.run() == daemon.EXIT_NOT_SYNCED
    assert Counting.instances[0].cycles == 0
    assert source.started and source.stopped
    health = running.checks.to_json()
    assert health["ready"] is False
    assert health["components"]["informers"] == {
        "ready": False,
        "detail": "caches not synced yet: pods",
    }


def test_no_eviction_reaches_the_backend_once_leadership_is_lost() -> None:
    """A cycle that outlives its term evicts nothing more: LeaderOnly refuses, no API call."""
    leadership = leader.Leadership(telemetry.AppMetrics(CollectorRegistry()).leader)
    leadership.started()

    def lose_then_evict(name: str, snapshot: Snapshot, handle: Handle) -> None:
        pods = list(snapshot.pods_on("n1"))
        handle.evictor.evict(pods[0], plugin=name, reason="while leading")
        leadership.stopped()
        for pod in pods[1:]:
            handle.evictor.evict(pod, plugin=name, reason="after the loss")

    inner = fakes.FakeBackend()
    guarded = leader.LeaderOnly(inner, lambda: leadership.is_leader)
    cluster = framework.StaticSource(
        nodes=fakes.nodes("n1", "n2"),
        pods=[builders.make_pod(f"p{i}", node="n1") for i in range(3)],
    )
    h = fakes.harness(
        fakes.policy(balance=["Lose"]),
        fakes.registry_with(Lose=lose_then_evict),
        cluster,
        backend=guarded,  # type: ignore[arg-type]
    )
    report = h.runner.run_once()
    assert report.evicted_pods == ["default/p0"]
    assert inner.calls == ["default/p0"]
    assert [s.reason_code for s in report.skipped] == [Reason.API_UNAVAILABLE] * 2
    assert "no longer leads" in report.skipped[0].detail


def test_a_lone_replica_always_leads() -> None:
    """Leader election off: leading from the start, and /healthz says why."""
    registry = CollectorRegistry()
    leadership = leader.Leadership.alone(telemetry.AppMetrics(registry).leader)
    assert leadership.is_leader
    assert not leadership.term.is_set()
    assert registry.get_sample_value("nodeqos_descheduler_leader") == 1
    assert leadership.health().ready
    assert "disabled" in leadership.health().detail


def test_identity_is_host_pid_and_a_random_part() -> None:
    """Two candidates in one process still differ; the pid is readable in the Lease."""
    import os

    first, second = leader.identity(), leader.identity()
    assert first != second
    assert f"_{os.getpid()}_" in first


class Stubborn:
    """A controller whose first run ignores its stop signal until the test opens `gate`."""

    instances: list[Stubborn] = []  # noqa: RUF012 (test bookkeeping, reset per test)

    def __init__(self, args: PluginArgs, handle: Handle) -> None:
        self.runs = 0
        self.cycles = 0
        self.gate = threading.Event()
        self.second_run = threading.Event()
        self.first_running = threading.Event()
        Stubborn.instances.append(self)

    def balance(self, snapshot: Snapshot) -> None:
        self.cycles += 1

    def run(self, stop: threading.Event) -> None:
        self.runs += 1
        if self.runs == 1:
            self.first_running.set()
            assert self.gate.wait(60), "the test never let the first run end"
            return
        self.second_run.set()
        stop.wait()


@pytest.mark.slow
def test_the_next_term_waits_until_the_last_terms_controllers_stopped() -> None:
    """A controller stuck past its term's end (in a hung API call, say) holds the next term
    back, however long (more than the 10 s the daemon used to give it); then it starts."""
    Stubborn.instances.clear()
    registry = fakes.registry_with()
    registry.register(
        "Stubborn",
        Stubborn,
        args=fakes.NoArgs,
        extension_points=frozenset({ExtensionPoint.BALANCE}),
    )
    cluster = framework.StaticSource(nodes=fakes.nodes("n1", "n2"))
    h = fakes.harness(fakes.policy(balance=["Stubborn"]), registry, cluster)
    metrics = CollectorRegistry()
    leadership = leader.Leadership(telemetry.AppMetrics(metrics).leader)
    running = daemon.Daemon(
        runner=h.runner,
        source=FakeSource(),  # type: ignore[arg-type]
        leadership=leadership,
        registry=metrics,
        addresses=[],
        interval=timedelta(milliseconds=10),
        sync_timeout=None,
        stopping=threading.Event(),
    )
    running.stuck_unhealthy = 5.0
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    (plugin,) = Stubborn.instances
    try:
        leadership.started()
        assert plugin.first_running.wait(5)
        eventually(lambda: plugin.cycles > 0, "a cycle in the first term")
        leadership.stopped()
        leadership.started()  # won back at once, while the first run is still stuck
        cycles = plugin.cycles
        assert not plugin.second_run.wait(11), "a second run began beside the stuck one"
        assert plugin.cycles <= cycles + 1, "the new term cycled before its controllers could run"
        stuck = running.checks.to_json()
        assert stuck["ready"] is False, "a controller stuck past stuck_unhealthy must fail /healthz"
        assert "has not stopped for" in stuck["components"]["descheduling"]["detail"]
        plugin.gate.set()
        assert plugin.second_run.wait(5), "the new term never started its controller"
        assert running.checks.to_json()["ready"] is True
        eventually(lambda: plugin.cycles > cycles + 1, "cycles in the new term")
    finally:
        plugin.gate.set()
        running.stop()
        thread.join(10)
    assert not thread.is_alive()
    Stubborn.instances.clear()


def test_leadership_ends_at_the_renew_deadline_while_the_election_hangs() -> None:
    """With a real elector whose renewal hangs: is_leader false, gauge 0, evictions refused
    at last renewal + renew_deadline, the term ended."""
    clock = FakeClock()
    api = FakeLeaseApi(clock)
    registry = CollectorRegistry()
    leadership = leader.Leadership(telemetry.AppMetrics(registry).leader)
    leadership.elector = leaderelection.LeaderElector(
        api,
        leaderelection.Config(
            namespace="kube-system",
            name="nodeqos-descheduler",
            identity="me",
            lease_duration=3.0,
            renew_deadline=2.0,
            retry_period=0.5,
        ),
        on_started=leadership.started,
        on_stopped=leadership.stopped,
        clock=clock,
    )
    inner = fakes.FakeBackend()
    guarded = leader.LeaderOnly(inner, lambda: leadership.is_leader)
    pod = builders.make_pod("p", node="n1")
    options = EvictOptions(plugin="X", reason="test")
    try:
        assert leadership.elector.try_acquire_or_renew()
        term = leadership.term
        assert registry.get_sample_value("nodeqos_descheduler_leader") == 1
        api.hang("GET")
        renewing = threading.Thread(target=leadership.elector.try_acquire_or_renew, daemon=True)
        renewing.start()
        assert api.hung.wait(10)
        clock.advance(1.999)
        assert guarded.evict(pod, options).outcome is not eviction.Outcome.UNAVAILABLE
        clock.advance(0.001)
        assert not leadership.is_leader
        assert guarded.evict(pod, options).outcome is eviction.Outcome.UNAVAILABLE
        assert term.wait(10), "the term did not end at the deadline"
        assert registry.get_sample_value("nodeqos_descheduler_leader") == 0
        assert inner.calls == ["default/p"]
    finally:
        api.answer()
