"""The manager's lifecycle: set up all, wait for the first sync, run the enabled, restart, stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Sequence
from pathlib import Path

import click
import pytest
from prometheus_client import CollectorRegistry

from qosmanager import (
    Backoff,
    ClaimRefused,
    FeatureGates,
    FeatureSpec,
    Manager,
    PeriodicStrategy,
    PluginRegistry,
    PluginSetupError,
    QoSMetrics,
    SyncTimeout,
    register_qos_ext_plugin,
)
from tests.qosmanager.builders import FakeClock, FakeHealth, FakeStates

ROOT = Path(__file__).resolve().parents[2]
WAIT = 10.0  # generous upper bound for thread hand-offs; never reached when all is well


class Scripted:
    """A plugin that fails `setup` or the first runs on request, then runs until stop."""

    def __init__(self, *, setup_error: Exception | None = None, run_failures: int = 0) -> None:
        self.setup_error = setup_error
        self.run_failures = run_failures
        self.setups = 0
        self.runs = 0
        self.running = threading.Event()
        self.stopped = threading.Event()

    def init_flags(self) -> Sequence[click.Parameter]:
        return []

    def setup(self, client: object, metric_cache: object, states: object) -> None:
        self.setups += 1
        if self.setup_error is not None:
            raise self.setup_error

    def run(self, stop: threading.Event) -> None:
        self.runs += 1
        if self.runs <= self.run_failures:
            raise RuntimeError(f"boom {self.runs}")
        self.running.set()
        stop.wait()
        self.stopped.set()


def manager_for(
    plugins: dict[str, tuple[Scripted, bool]],
    metrics: QoSMetrics,
    health: FakeHealth,
    **kwargs: object,
) -> Manager:
    registry = PluginRegistry()
    for name, (plugin, default) in plugins.items():
        register_qos_ext_plugin(registry, name, FeatureSpec(default=default), plugin)  # type: ignore[arg-type]
    return Manager(
        registry,
        builtin_gates=FeatureGates([]),
        extension_gates=registry.extension_gates(""),
        health=health,
        metrics=metrics,
        backoff=Backoff(initial=0.001, maximum=0.002),
        **kwargs,  # type: ignore[arg-type]
    )


def test_setup_failure_fails_start_up_naming_the_plugin(
    metrics: QoSMetrics, registry: CollectorRegistry
) -> None:
    """A plugin raising in setup stops start-up with its name; the error is counted."""
    health = FakeHealth()
    broken = Scripted(setup_error=OSError("no /host/proc"))
    manager = manager_for({"Good": (Scripted(), True), "Broken": (broken, True)}, metrics, health)
    with pytest.raises(
        PluginSetupError, match="QoS plugin 'Broken' failed to set up: no /host/proc"
    ):
        manager.setup_all(None, None, FakeStates())  # type: ignore[arg-type]
    assert (
        registry.get_sample_value(
            "nodeqos_agent_plugin_errors_total", {"plugin": "Broken", "phase": "setup"}
        )
        == 1
    )
    assert health.last("qosmanager") == (False, "plugin Broken failed to set up: no /host/proc")
    with pytest.raises(RuntimeError, match="before setup_all"):
        manager.start(threading.Event())


def test_all_are_set_up_but_only_enabled_ones_run(metrics: QoSMetrics) -> None:
    """Disabled plugins are set up (as in koordlet) but never run; /healthz lists the running."""
    health = FakeHealth()
    on, off = Scripted(), Scripted()
    manager = manager_for({"On": (on, True), "Off": (off, False)}, metrics, health)
    manager.setup_all(None, None, FakeStates())  # type: ignore[arg-type]
    stop = threading.Event()
    manager.start(stop)
    assert on.running.wait(WAIT)
    stop.set()
    assert manager.wait(WAIT)
    assert (on.setups, off.setups, off.runs) == (1, 1, 0)
    assert on.stopped.is_set()
    assert ("qosmanager", True, "running: On") in health.reports


class Reverting(Scripted):
    """A `Revertible` plugin: counts its reverts, raises in one on request."""

    def __init__(self, *, revert_error: Exception | None = None) -> None:
        super().__init__()
        self.revert_error = revert_error
        self.reverts = 0

    def revert(self) -> None:
        self.reverts += 1
        if self.revert_error is not None:
            raise self.revert_error


def test_disabled_revertible_plugins_revert_once(
    metrics: QoSMetrics, registry: CollectorRegistry
) -> None:
    """After the first sync every plugin whose gate is off and that can revert does, once;
    one that fails is counted; an enabled one is only run."""
    health = FakeHealth()
    on, off, failing = Reverting(), Reverting(), Reverting(revert_error=OSError("read-only"))
    manager = manager_for(
        {"On": (on, True), "Off": (off, False), "Failing": (failing, False)}, metrics, health
    )
    manager.setup_all(None, None, FakeStates())  # type: ignore[arg-type]
    stop = threading.Event()
    manager.start(stop)
    assert on.running.wait(WAIT)
    stop.set()
    assert manager.wait(WAIT)
    assert (on.reverts, off.reverts, failing.reverts) == (0, 1, 1)
    assert (off.runs, failing.runs) == (0, 0)
    assert (
        registry.get_sample_value(
            "nodeqos_agent_plugin_errors_total", {"plugin": "Failing", "phase": "revert"}
        )
        == 1
    )


def test_crashing_plugin_is_counted_and_restarted_with_backoff(
    metrics: QoSMetrics, registry: CollectorRegistry
) -> None:
    """Two failed runs are logged, counted and restarted; the third run stays up."""
    health = FakeHealth()
    flaky = Scripted(run_failures=2)
    manager = manager_for({"Flaky": (flaky, True)}, metrics, health)
    manager.setup_all(None, None, FakeStates())  # type: ignore[arg-type]
    stop = threading.Event()
    manager.start(stop)
    assert flaky.running.wait(WAIT)
    stop.set()
    assert manager.wait(WAIT)
    assert flaky.runs == 3
    assert (
        registry.get_sample_value(
            "nodeqos_agent_plugin_errors_total", {"plugin": "Flaky", "phase": "run"}
        )
        == 2
    )
    details = [d for c, ready, d in health.reports if c == "qosmanager/Flaky" and not ready]
    assert details[:2] == [
        "failed: RuntimeError('boom 1'); restarting in 0.001s",
        "failed: RuntimeError('boom 2'); restarting in 0.002s",
    ]


def test_sync_wait_is_bounded_and_visible(metrics: QoSMetrics, registry: CollectorRegistry) -> None:
    """An informer that never syncs: /healthz says so while waiting, then start-up gives up."""
    health = FakeHealth()
    clock = FakeClock()
    plugin = Scripted()
    states = FakeStates(synced=False, on_wait=clock.advance)  # each wait uses its whole timeout
    manager = manager_for({"P": (plugin, True)}, metrics, health, sync_timeout=3.0, clock=clock)
    manager.setup_all(None, None, states)  # type: ignore[arg-type]
    manager.start(threading.Event())
    with pytest.raises(SyncTimeout, match="did not sync within 3s"):
        manager.wait(WAIT)
    waiting = [d for c, _, d in health.reports if d.startswith("waiting")]
    assert waiting == [
        "waiting for the states informer's first sync (0s)",
        "waiting for the states informer's first sync (1s)",
        "waiting for the states informer's first sync (2s)",
    ]
    assert health.last("qosmanager") == (
        False,
        "states informer did not sync within 3s; QoS plugins not started",
    )
    assert plugin.runs == 0
    assert (
        registry.get_sample_value(
            "nodeqos_agent_plugin_errors_total", {"plugin": "qosmanager", "phase": "sync"}
        )
        == 1
    )


def test_stop_during_the_sync_wait_ends_quietly(metrics: QoSMetrics) -> None:
    """Stopping while still waiting for the informer is a clean stop, not a failure."""
    health = FakeHealth()
    stop = threading.Event()
    states = FakeStates(synced=False, on_wait=lambda _t: stop.set())
    manager = manager_for({"P": (Scripted(), True)}, metrics, health)
    manager.setup_all(None, None, states)  # type: ignore[arg-type]
    manager.start(stop)
    assert manager.wait(WAIT) is True


def test_strategy_refused_a_file_keeps_running(metrics: QoSMetrics) -> None:
    """A tick refused by the executor's ownership rule is logged; the loop goes on."""
    stop = threading.Event()

    class Outvoted(PeriodicStrategy):
        name = "Outvoted"
        interval_flag = "--outvoted-interval"
        ticks = 0

        def tick(self) -> None:
            self.ticks += 1
            if self.ticks == 1:
                raise ClaimRefused("kubepods/besteffort (cpu_quota)", "Outvoted", "CPUBurst")
            stop.set()

    strategy = Outvoted(None, interval=0.001)  # type: ignore[arg-type]
    strategy.run(stop)
    assert strategy.ticks == 2


SIGTERM_SCRIPT = textwrap.dedent(
    """
    import sys, threading
    from prometheus_client import CollectorRegistry
    import qosmanager
    from tests.qosmanager.builders import FakeHealth, FakeStates

    class Loop:
        def init_flags(self): return []
        def setup(self, client, metric_cache, states): pass
        def run(self, stop):
            print("running", flush=True)
            stop.wait()
            print("plugin stopped", flush=True)

    registry = qosmanager.PluginRegistry()
    qosmanager.register_qos_ext_plugin(registry, "Loop", qosmanager.FeatureSpec(default=True), Loop())
    manager = qosmanager.Manager(
        registry, builtin_gates=qosmanager.FeatureGates([]),
        extension_gates=registry.extension_gates(""), health=FakeHealth(),
        metrics=qosmanager.QoSMetrics(CollectorRegistry()),
    )
    stop = threading.Event()
    qosmanager.stop_on_sigterm(stop)
    manager.setup_all(None, None, FakeStates())
    manager.start(stop)
    while not manager.wait(0.05):
        pass
    print("manager stopped", flush=True)
    """
)


def test_sigterm_stops_plugins_cleanly() -> None:
    """SIGTERM sets the stop event: plugins return, the manager joins, exit status 0."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SIGTERM_SCRIPT],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "running"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=WAIT)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, err
    assert out.split() == ["plugin", "stopped", "manager", "stopped"]
