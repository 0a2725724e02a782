"""The runner: cycle order, plugin isolation, skipped cycles, metrics, shared snapshot."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import pytest

from descheduler import framework
from descheduler.config import PluginArgs
from descheduler.framework import Handle, Reason, Snapshot
from kube import backoff, objects
from tests import builders
from tests.descheduler import fakes


def two_nodes() -> framework.StaticSource:
    return framework.StaticSource(
        nodes=fakes.nodes("n1", "n2"),
        pods=[builders.make_pod("a", node="n1"), builders.make_pod("b", node="n2")],
    )


def recorder(calls: list[str]) -> fakes.Script:
    def script(name: str, snapshot: Snapshot, handle: Handle) -> None:
        calls.append(f"{handle.profile}/{name}")

    return script


def test_deschedule_runs_before_balance_across_profiles() -> None:
    """All profiles' deschedule plugins, then all profiles' balance plugins, in config order."""
    calls: list[str] = []
    registry = fakes.registry_with(D1=recorder(calls), D2=recorder(calls), B1=recorder(calls))
    raw = fakes.policy(
        profiles=[
            {
                "name": "first",
                "plugins": {
                    "balance": {"enabled": ["B1"]},
                    "deschedule": {"enabled": ["D2", "D1"]},
                },
            },
            {
                "name": "second",
                "plugins": {"deschedule": {"enabled": ["D1"]}, "balance": {"enabled": ["B1"]}},
            },
        ]
    )
    fakes.harness(raw, registry, two_nodes()).runner.run_once()
    assert calls == ["first/D2", "first/D1", "second/D1", "first/B1", "second/B1"]


def test_a_raising_plugin_is_isolated_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    """A plugin that raises does not stop the others; it is logged, counted and reported."""
    calls: list[str] = []

    def broken(name: str, snapshot: Snapshot, handle: Handle) -> None:
        raise RuntimeError("boom")

    registry = fakes.registry_with(Broken=broken, After=recorder(calls))
    h = fakes.harness(fakes.policy(deschedule=["Broken"], balance=["After"]), registry, two_nodes())
    with caplog.at_level(logging.ERROR, logger="descheduler.runner"):
        report = h.runner.run_once()
    assert calls == ["p1/After"]
    assert h.sample("nodeqos_descheduler_plugin_errors_total", plugin="Broken", profile="p1") == 1
    assert [(f.plugin, f.extension_point, f.error) for f in report.failures] == [
        ("Broken", "deschedule", "RuntimeError: boom")
    ]
    assert "plugin Broken (profile p1, deschedule) failed" in caplog.text


def test_every_plugin_call_and_the_cycle_are_timed() -> None:
    """Histograms get one observation per plugin call and one per cycle."""
    registry = fakes.registry_with(B=fakes.nothing)
    h = fakes.harness(fakes.policy(balance=["B"]), registry, two_nodes())
    h.runner.run_once()
    h.runner.run_once()
    labels = {"plugin": "B", "profile": "p1", "extension_point": "balance"}
    assert h.sample("nodeqos_descheduler_plugin_duration_seconds_count", **labels) == 2
    assert h.sample("nodeqos_descheduler_cycle_duration_seconds_count") == 2
    assert h.sample("nodeqos_descheduler_cycles_total", result="completed") == 2


@pytest.mark.parametrize(
    ("node_list", "selector"),
    [
        pytest.param([], None, id="no-nodes"),
        pytest.param(fakes.nodes("n1"), None, id="one-node"),
        pytest.param(
            [builders.make_node("n1"), builders.make_node("n2", ready=False)], None, id="one-ready"
        ),
        pytest.param(
            [builders.make_node("n1", labels={"pool": "a"}), builders.make_node("n2")],
            "pool=a",
            id="one-selected",
        ),
    ],
)
def test_fewer_than_two_ready_nodes_skip_the_cycle(
    node_list: list[objects.Node], selector: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    """No plugin runs; the report and the log say why."""
    calls: list[str] = []
    registry = fakes.registry_with(B=recorder(calls))
    top = {"nodeSelector": selector} if selector else {}
    h = fakes.harness(
        fakes.policy(balance=["B"], **top), registry, framework.StaticSource(nodes=node_list)
    )
    with caplog.at_level(logging.INFO, logger="descheduler.runner"):
        report = h.runner.run_once()
    assert calls == []
    assert report.reasons == [Reason.TOO_FEW_NODES]
    assert report.notes[0].detail.startswith("fewer than two ready nodes")
    assert "skipping the cycle: fewer than two ready nodes" in caplog.text
    assert h.sample("nodeqos_descheduler_cycles_total", result="skipped") == 1


def test_an_unsynced_source_skips_the_cycle() -> None:
    """A source that is not ready yet gives a not_synced note, not an exception."""

    class Unsynced:
        def state(self) -> framework.ClusterState:
            raise framework.SourceNotReady("caches not synced yet: pods")

    h = fakes.harness(fakes.policy(), fakes.registry_with(), Unsynced())
    report = h.runner.run_once()
    assert report.reasons == [Reason.NOT_SYNCED]
    assert report.notes[0].detail == "caches not synced yet: pods"


def test_later_plugins_see_earlier_decisions() -> None:
    """One snapshot per cycle: a pod evicted by the first plugin is gone for the second."""
    seen: list[list[str]] = []

    def evict_a(name: str, snapshot: Snapshot, handle: Handle) -> None:
        [pod] = [p for p in snapshot.pods_on("n1") if p.name == "a"]
        assert handle.evictor.evict(pod, plugin=name, reason="first", destination="n2")

    def look(name: str, snapshot: Snapshot, handle: Handle) -> None:
        seen.append([p.name for p in snapshot.pods_on("n1")])
        seen.append([p.name for p in snapshot.arrivals("n2")])

    registry = fakes.registry_with(EvictA=evict_a, Look=look)
    raw = fakes.policy(
        profiles=[
            {"name": "one", "plugins": {"deschedule": {"enabled": ["EvictA"]}}},
            {"name": "two", "plugins": {"deschedule": {"enabled": ["Look"]}}},
        ]
    )
    source = framework.StaticSource(
        nodes=fakes.nodes("n1", "n2"),
        pods=[builders.make_pod("a", node="n1", cpu="500m"), builders.make_pod("b", node="n1")],
    )
    report = fakes.harness(raw, registry, source).runner.run_once()
    assert seen == [["b"], ["a"]]
    [projection] = [p for p in report.projections if p.node == "n1"]
    assert (projection.requests_before["cpu"], projection.requests_after["cpu"]) == (600, 100)


def test_profile_node_selector_restricts_its_view() -> None:
    """A Koordinator profile nodeSelector narrows the nodes that profile's plugins see."""
    seen: dict[str, list[str]] = {}

    def look(name: str, snapshot: Snapshot, handle: Handle) -> None:
        seen[handle.profile] = list(snapshot.node_names)

    registry = fakes.registry_with(Look=look)
    raw = fakes.policy(
        profiles=[
            {"name": "all", "plugins": {"balance": {"enabled": ["Look"]}}},
            {
                "name": "pool-a",
                "nodeSelector": {"matchLabels": {"pool": "a"}},
                "plugins": {"balance": {"enabled": ["Look"]}},
            },
        ]
    )
    source = framework.StaticSource(
        nodes=[
            builders.make_node("n1", labels={"pool": "a"}),
            builders.make_node("n2"),
            builders.make_node("n3", labels={"pool": "a"}),
        ]
    )
    fakes.harness(raw, registry, source).runner.run_once()
    assert seen == {"all": ["n1", "n2", "n3"], "pool-a": ["n1", "n3"]}


def test_the_handle_snapshot_is_only_there_during_a_cycle() -> None:
    """Filters reach the running cycle's snapshot through the Handle; between cycles it raises."""
    got: list[Snapshot] = []

    def grab(name: str, snapshot: Snapshot, handle: Handle) -> None:
        got.append(handle.snapshot())

    h = fakes.harness(fakes.policy(balance=["Grab"]), fakes.registry_with(Grab=grab), two_nodes())
    h.runner.run_once()
    assert got[0].node_names == ("n1", "n2")
    with pytest.raises(RuntimeError, match="no descheduling cycle is running"):
        h.runner.profiles[0].handle.snapshot()


def test_run_with_zero_interval_runs_one_cycle_and_starts_controllers() -> None:
    """run(stop) without an interval is one pass; ControllerPlugins get their own thread."""
    started = threading.Event()

    class Controller:
        name = "Controller"

        def __init__(self, args: PluginArgs, handle: Handle) -> None:
            pass

        def balance(self, snapshot: Snapshot) -> None:
            pass

        def run(self, stop: threading.Event) -> None:
            started.set()
            stop.wait()

    registry = fakes.registry_with()
    registry.register(
        "Controller", Controller, args=fakes.NoArgs, extension_points=fakes.SCRIPT_POINTS
    )
    h = fakes.harness(fakes.policy(balance=["Controller"]), registry, two_nodes())
    reports: list[framework.CycleReport] = []
    stop = threading.Event()
    try:
        h.runner.run(stop, timedelta(0), on_report=reports.append)
        assert started.wait(5)
    finally:
        stop.set()
    assert len(reports) == 1


def test_a_controller_that_raises_is_restarted_with_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A controller that raises runs again after a doubling, capped delay; its errors are counted."""
    runs: list[int] = []
    settled = threading.Event()

    class Flaky:
        name = "Flaky"

        def __init__(self, args: PluginArgs, handle: Handle) -> None:
            pass

        def balance(self, snapshot: Snapshot) -> None:
            pass

        def run(self, stop: threading.Event) -> None:
            runs.append(len(runs))
            if len(runs) <= 3:
                raise RuntimeError(f"broken run {len(runs)}")
            settled.set()
            stop.wait()

    registry = fakes.registry_with()
    registry.register("Flaky", Flaky, args=fakes.NoArgs, extension_points=fakes.SCRIPT_POINTS)
    h = fakes.harness(fakes.policy(balance=["Flaky"]), registry, two_nodes())
    delays: list[float] = []

    class Recorded(backoff.Backoff):
        def delay(self) -> float:
            delays.append(super().delay())
            return delays[-1]

    h.runner.controller_backoff = lambda: Recorded(
        backoff.Policy(initial=0.01, cap=0.02, jitter=0.5), rand=lambda: 1.0
    )
    stop = threading.Event()
    with caplog.at_level(logging.INFO, logger="descheduler.runner"):
        (thread,) = h.runner.start_controllers(stop)
        try:
            assert settled.wait(5), f"the controller did not settle; runs {runs}"
        finally:
            stop.set()
            thread.join(5)
    assert not thread.is_alive()
    assert len(runs) == 4
    assert delays == [0.01, 0.02, 0.02]  # doubling, capped
    assert h.sample("nodeqos_descheduler_plugin_errors_total", plugin="Flaky", profile="p1") == 3
    assert caplog.text.count("restarting controller Flaky (profile p1)") == 3


def test_a_controller_is_not_restarted_once_the_term_ended() -> None:
    """A controller that raises as its term ends stays stopped: no restart after stop."""
    runs: list[int] = []
    stop = threading.Event()

    class Dying:
        name = "Dying"

        def __init__(self, args: PluginArgs, handle: Handle) -> None:
            pass

        def balance(self, snapshot: Snapshot) -> None:
            pass

        def run(self, stop_: threading.Event) -> None:
            runs.append(1)
            stop.set()
            raise RuntimeError("dying with the term")

    registry = fakes.registry_with()
    registry.register("Dying", Dying, args=fakes.NoArgs, extension_points=fakes.SCRIPT_POINTS)
    h = fakes.harness(fakes.policy(balance=["Dying"]), registry, two_nodes())
    (thread,) = h.runner.start_controllers(stop)
    thread.join(5)
    assert not thread.is_alive()
    assert runs == [1]
