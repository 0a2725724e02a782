"""What the evictor makes of each answer: a reason code per candidate, never a crash."""

from __future__ import annotations

from typing import Any

import pytest

from descheduler import evictions, framework
from descheduler.config import PluginArgs
from descheduler.evictions import Backend, EvictOptions
from descheduler.framework import Handle, Reason, Snapshot
from kube import eviction, objects
from tests import builders
from tests.descheduler import fakes

pod = builders.make_pod


def cluster(*names: str) -> framework.StaticSource:
    return framework.StaticSource(
        nodes=fakes.nodes("n1", "n2"), pods=[pod(n, node="n1") for n in names]
    )


def evict_all(
    backend: fakes.FakeBackend, *names: str, **top: Any
) -> tuple[fakes.Harness, framework.CycleReport]:
    registry = fakes.registry_with(All=fakes.evict_all)
    h = fakes.harness(
        fakes.policy(balance=["All"], **top), registry, cluster(*names), backend=backend
    )
    return h, h.runner.run_once()


@pytest.mark.parametrize(
    ("outcome", "code", "result"),
    [
        pytest.param(eviction.Outcome.PDB_BLOCKED, Reason.PDB_BLOCKED, "pdb_blocked", id="429"),
        pytest.param(eviction.Outcome.NOT_FOUND, Reason.POD_GONE, "pod_gone", id="404"),
        pytest.param(eviction.Outcome.UID_MISMATCH, Reason.POD_GONE, "pod_gone", id="409-uid"),
        pytest.param(eviction.Outcome.FORBIDDEN, Reason.FORBIDDEN, "forbidden", id="403"),
        pytest.param(
            eviction.Outcome.UNAVAILABLE, Reason.API_UNAVAILABLE, "api_unavailable", id="down"
        ),
        pytest.param(eviction.Outcome.FAILED, Reason.EVICTION_FAILED, "error", id="other"),
    ],
)
def test_each_outcome_has_its_reason_and_result(
    outcome: eviction.Outcome, code: Reason, result: str
) -> None:
    """The API's answer becomes the skip's reason code and the metric's result label."""
    h, report = evict_all(fakes.FakeBackend({"a": outcome}), "a")
    assert report.evictions == ()
    [skip] = report.skipped
    assert (skip.pod, skip.plugin, skip.reason_code) == ("default/a", "All", code)
    labels = {"strategy": "All", "profile": "p1", "namespace": "default", "node": "n1"}
    assert h.sample("nodeqos_descheduler_pods_evicted_total", result=result, **labels) == 1
    assert h.sample("nodeqos_descheduler_pods_evicted_total", result="success", **labels) == 0
    assert h.sample("nodeqos_descheduler_decisions_total", plugin="All", reason=code.value) == 1


def test_pdb_blocked_pod_is_not_retried_this_cycle() -> None:
    """D4: after a 429 the next candidate is tried; a later plugin asking again gets no API call."""
    backend = fakes.FakeBackend({"a": eviction.Outcome.PDB_BLOCKED})
    registry = fakes.registry_with(First=fakes.evict_all, Second=fakes.evict_all)
    h = fakes.harness(
        fakes.policy(balance=["First", "Second"]), registry, cluster("a", "b"), backend=backend
    )
    report = h.runner.run_once()
    assert backend.calls == ["default/a", "default/b"]
    assert report.evicted_pods == ["default/b"]
    assert [(s.pod, s.plugin, s.reason_code) for s in report.skipped] == [
        ("default/a", "First", Reason.PDB_BLOCKED),
        ("default/a", "Second", Reason.PDB_BLOCKED),
    ]  # b, evicted by First, is no longer on n1 for Second
    assert "not retried" in report.skipped[1].detail


def test_pdb_blocked_pod_rests_across_cycles_with_doubling_backoff() -> None:
    """After a 429 the pod rests 1 min (reason backoff, no API call), then 2 min after the next 429."""
    backend = fakes.FakeBackend({"a": eviction.Outcome.PDB_BLOCKED})
    h = fakes.harness(
        fakes.policy(balance=["First"]),
        fakes.registry_with(First=fakes.evict_all),
        cluster("a"),
        backend=backend,
    )
    h.runner.run_once()
    resting = h.runner.run_once()  # same minute: no call
    assert backend.calls == ["default/a"]
    assert [(s.pod, s.reason_code) for s in resting.skipped] == [("default/a", Reason.BACKOFF)]
    assert "next try after" in resting.skipped[0].detail
    h.clock.advance(seconds=61)
    h.runner.run_once()  # rested: asked again, refused again
    assert backend.calls == ["default/a", "default/a"]
    h.clock.advance(seconds=61)
    assert h.runner.run_once().skipped[0].reason_code is Reason.BACKOFF  # now 2 minutes
    h.clock.advance(seconds=60)
    h.runner.run_once()
    assert backend.calls.count("default/a") == 3


def test_api_down_stops_further_calls_this_cycle() -> None:
    """After one unreachable-server answer, the other candidates are refused without calls."""
    backend = fakes.FakeBackend({"a": eviction.Outcome.UNAVAILABLE})
    _, report = evict_all(backend, "a", "b", "c")
    assert backend.calls == ["default/a"]
    assert [s.reason_code for s in report.skipped] == [Reason.API_UNAVAILABLE] * 3


def test_safety_floor_holds_without_any_filter_plugin() -> None:
    """Mirror, static, terminating and unbound pods are refused even with no DefaultEvictor."""
    pods = [
        pod("mirror", annotations={"kubernetes.io/config.mirror": "x"}),
        pod("static", annotations={"kubernetes.io/config.source": "file"}),
        pod("dying", deleting=fakes.NOW),
        pod("fine"),
    ]
    raw = fakes.policy(
        profiles=[
            {
                "name": "bare",
                "plugins": {
                    "filter": {"disabled": [{"name": "*"}]},
                    "preEvictionFilter": {"disabled": [{"name": "*"}]},
                    "balance": {"enabled": ["All"]},
                },
            }
        ]
    )
    source = framework.StaticSource(nodes=fakes.nodes("n1", "n2"), pods=pods)
    h = fakes.harness(raw, fakes.registry_with(All=fakes.evict_all), source)
    report = h.runner.run_once()
    assert report.evicted_pods == ["default/fine"]
    assert {s.pod: s.detail for s in report.skipped} == {
        "default/dying": "framework: pod is already terminating",
        "default/mirror": "framework: mirror pod (the kubelet recreates it)",
        "default/static": "framework: static pod (the kubelet owns it)",
    }
    unbound = pod("unbound", node=None)
    assert h.runner.profiles[0].evictor.filter(unbound) is not None


def test_evict_rechecks_filters_for_careless_plugins() -> None:
    """A plugin that skips filter() still cannot evict a DaemonSet pod or one that fits nowhere."""

    def careless(name: str, snapshot: Snapshot, handle: Handle) -> None:
        for candidate in snapshot.pods_on("n1"):
            handle.evictor.evict(candidate, plugin=name, reason="no checks")

    pods = [pod("ds", owner="DaemonSet"), pod("huge", cpu="3950m"), pod("ok")]
    source = framework.StaticSource(
        nodes=fakes.nodes("n1", "n2"), pods=[*pods, pod("filler", node="n2", cpu="100m")]
    )
    h = fakes.harness(
        fakes.policy(balance=["Careless"]), fakes.registry_with(Careless=careless), source
    )
    report = h.runner.run_once()
    assert report.evicted_pods == ["default/ok"]
    assert {s.pod: s.reason_code for s in report.skipped} == {
        "default/ds": Reason.FILTERED,
        "default/huge": Reason.NO_FIT,
    }


def test_evict_point_plugin_carries_out_the_eviction() -> None:
    """An Evict plugin gets the pod, the options and the framework's backend."""
    seen: list[tuple[str, EvictOptions, str]] = []

    class Migrator:
        name = "Migrator"

        def __init__(self, args: PluginArgs, handle: Handle) -> None:
            pass

        def evict(
            self, candidate: objects.Pod, options: EvictOptions, backend: Backend
        ) -> eviction.Result:
            seen.append((candidate.name, options, backend.name))
            return eviction.Result(eviction.Outcome.EVICTED)

    registry = fakes.registry_with(All=fakes.evict_all)
    registry.register(
        "Migrator", Migrator, args=fakes.NoArgs, extension_points=frozenset({"evict"})
    )  # type: ignore[arg-type]
    raw = fakes.policy(
        profiles=[
            {
                "name": "koord",
                "plugins": {
                    "evict": {"enabled": ["Migrator"], "disabled": ["*"]},
                    "balance": {"enabled": ["All"]},
                },
            }
        ]
    )
    backend = fakes.FakeBackend()
    h = fakes.harness(raw, registry, cluster("a"), backend=backend)
    assert h.runner.run_once().evicted_pods == ["default/a"]
    assert seen == [
        ("a", EvictOptions(plugin="All", reason="test", profile="koord"), "FakeBackend")
    ]
    assert backend.calls == []


def test_default_evictor_at_the_evict_point_uses_the_backend() -> None:
    """Koordinator-style: DefaultEvictor enabled at evict hands the pod to the backend."""
    raw = fakes.policy(
        profiles=[
            {
                "name": "koord",
                "plugins": {
                    "evict": {"enabled": ["DefaultEvictor"]},
                    "balance": {"enabled": ["All"]},
                },
            }
        ]
    )
    backend = fakes.FakeBackend()
    h = fakes.harness(raw, fakes.registry_with(All=fakes.evict_all), cluster("a"), backend=backend)
    h.runner.run_once()
    assert backend.calls == ["default/a"]
    assert backend.options == [EvictOptions(plugin="All", reason="test", profile="koord")]


def test_a_raising_evict_plugin_releases_its_slot_and_is_reported() -> None:
    """The exception reaches the runner (one failure); the limit slot is not leaked."""

    class Exploding:
        name = "Exploding"

        def __init__(self, args: PluginArgs, handle: Handle) -> None:
            pass

        def evict(self, *args: Any) -> eviction.Result:
            raise RuntimeError("kaboom")

    probes: list[bool] = []

    def try_one(name: str, snapshot: Snapshot, handle: Handle) -> None:
        try:
            handle.evictor.evict(snapshot.pods_on("n1")[0], plugin=name, reason="x")
        finally:
            probes.append(handle.evictor.total_limit_reached())

    registry = fakes.registry_with(Try=try_one)
    registry.register(
        "Exploding", Exploding, args=fakes.NoArgs, extension_points=frozenset({"evict"})
    )  # type: ignore[arg-type]
    raw = fakes.policy(
        maxNoOfPodsToEvictTotal=1,
        profiles=[
            {
                "name": "p",
                "plugins": {
                    "evict": {"enabled": ["Exploding"], "disabled": ["*"]},
                    "balance": {"enabled": ["Try"]},
                },
            }
        ],
    )
    report = fakes.harness(raw, registry, cluster("a")).runner.run_once()
    assert probes == [False]
    assert [(f.plugin, f.error) for f in report.failures] == [("Try", "RuntimeError: kaboom")]


def test_skips_are_reported_once_per_plugin_and_pod() -> None:
    """A plugin asking twice about the same filtered pod reports it once."""

    def twice(name: str, snapshot: Snapshot, handle: Handle) -> None:
        for _ in range(2):
            handle.evictor.evictable(snapshot.pods_on("n1"), plugin=name)

    source = framework.StaticSource(
        nodes=fakes.nodes("n1", "n2"), pods=[pod("ds", owner="DaemonSet")]
    )
    h = fakes.harness(fakes.policy(balance=["Twice"]), fakes.registry_with(Twice=twice), source)
    report = h.runner.run_once()
    assert [(s.pod, s.detail) for s in report.skipped] == [
        ("default/ds", "DefaultEvictor: DaemonSet pod")
    ]
    assert h.sample("nodeqos_descheduler_decisions_total", plugin="Twice", reason="filtered") == 1


def test_plugins_record_their_own_reasons() -> None:
    """handle.decisions takes plugin-level skips and notes into the report and metrics."""

    def picky(name: str, snapshot: Snapshot, handle: Handle) -> None:
        handle.decisions.skip(
            snapshot.pods_on("n1")[0], plugin=name, reason=Reason.COOL_DOWN, detail="moved 5m ago"
        )
        handle.decisions.note(Reason.NO_DESTINATION, "no underutilized nodes", plugin=name)

    h = fakes.harness(
        fakes.policy(balance=["Picky"]), fakes.registry_with(Picky=picky), cluster("a")
    )
    report = h.runner.run_once()
    assert [(s.reason_code, s.detail) for s in report.skipped] == [
        (Reason.COOL_DOWN, "moved 5m ago")
    ]
    assert [(n.reason, n.detail, n.plugin) for n in report.notes] == [
        (Reason.NO_DESTINATION, "no underutilized nodes", "Picky")
    ]
    assert report.to_dict()["notes"][0]["reason"] == "no_destination"
    assert h.sample("nodeqos_descheduler_decisions_total", plugin="Picky", reason="cool_down") == 1


def test_event_message_names_node_plugin_profile_and_reason() -> None:
    """The Event text the backends write: who evicted the pod from where, and why."""
    options = EvictOptions(plugin="LowNodeLoad", reason="node n1 is hot", profile="p1")
    assert evictions.event_message(pod("x", node="n7"), options) == (
        "pod evicted from node n7 by LowNodeLoad, profile p1: node n1 is hot"
    )


def test_a_stale_reference_cannot_be_evicted_twice() -> None:
    """A plugin holding a pod evicted earlier this cycle gets already_evicted."""

    def twice(name: str, snapshot: Snapshot, handle: Handle) -> None:
        target = snapshot.pods_on("n1")[0]
        handle.evictor.evict(target, plugin=name, reason="first")
        handle.evictor.evict(target, plugin=name, reason="again")

    h = fakes.harness(
        fakes.policy(balance=["Twice"]), fakes.registry_with(Twice=twice), cluster("a")
    )
    report = h.runner.run_once()
    assert report.evicted_pods == ["default/a"]
    assert [s.reason_code for s in report.skipped] == [Reason.ALREADY_EVICTED]
    assert h.backend.calls == ["default/a"]
