"""Eviction caps (SCENARIOS.md D5): counted at admission, named when hit, reset every cycle."""

from __future__ import annotations

from typing import Any

import pytest

from descheduler import framework
from descheduler.framework import Handle, Reason, Snapshot
from kube import eviction, objects
from tests import builders
from tests.descheduler import fakes

pod = builders.make_pod


def hottest_first(name: str, snapshot: Snapshot, handle: Handle) -> None:
    """Two evictions per node, nodes by requested CPU (hottest first), biggest pods first."""
    for node in sorted(snapshot.nodes, key=lambda n: (-snapshot.requested(n.name).cpu, n.name)):
        wanted = 2
        pods = handle.evictor.evictable(snapshot.pods_on(node.name), plugin=name)
        for candidate in sorted(pods, key=lambda p: (-p.requests.cpu, p.namespace, p.name)):
            if wanted and handle.evictor.evict(candidate, plugin=name, reason="hot"):
                wanted -= 1


def three_hot_nodes() -> framework.StaticSource:
    pods = []
    for node, cpu in (("a", "900m"), ("b", "800m"), ("c", "700m")):
        pods += [pod(f"{node}{i}", node=node, cpu=cpu) for i in range(3)]
    return framework.StaticSource(nodes=fakes.nodes("a", "b", "c"), pods=pods)


def run(
    source: framework.StaticSource, backend: fakes.FakeBackend | None = None, **top: Any
) -> fakes.Harness:
    registry = fakes.registry_with(Hot=hottest_first)
    return fakes.harness(fakes.policy(balance=["Hot"], **top), registry, source, backend=backend)


def test_d5_two_evictions_one_from_each_of_the_two_hottest_nodes() -> None:
    """Per node 1, total 2; three hot nodes want two each: a0 and b0 go, nothing from c."""
    h = run(three_hot_nodes(), maxNoOfPodsToEvictPerNode=1, maxNoOfPodsToEvictTotal=2)
    report = h.runner.run_once()
    assert report.evicted_pods == ["default/a0", "default/b0"]
    limited = [(s.pod, s.detail) for s in report.skipped if s.reason_code is Reason.LIMIT_REACHED]
    assert limited == [
        ("default/a1", "framework: maxNoOfPodsToEvictPerNode (1) reached on node a"),
        ("default/a2", "framework: maxNoOfPodsToEvictPerNode (1) reached on node a"),
        ("default/b1", "framework: maxNoOfPodsToEvictTotal (2) reached"),
        ("default/b2", "framework: maxNoOfPodsToEvictTotal (2) reached"),
        ("default/c0", "framework: maxNoOfPodsToEvictTotal (2) reached"),
        ("default/c1", "framework: maxNoOfPodsToEvictTotal (2) reached"),
        ("default/c2", "framework: maxNoOfPodsToEvictTotal (2) reached"),
    ]
    assert (
        h.sample("nodeqos_descheduler_decisions_total", plugin="Hot", reason="limit_reached") == 7
    )


def test_counters_reset_next_cycle() -> None:
    """A new cycle starts with empty counters: the same two pods are admitted again."""
    h = run(three_hot_nodes(), maxNoOfPodsToEvictPerNode=1, maxNoOfPodsToEvictTotal=2)
    first, second = h.runner.run_once(), h.runner.run_once()
    assert first.evicted_pods == second.evicted_pods == ["default/a0", "default/b0"]
    assert h.backend.calls == ["default/a0", "default/b0"] * 2


def test_counted_at_admission_before_the_api_call() -> None:
    """While the backend is evicting the first pod, the total limit of 1 is already used."""
    seen: list[bool] = []
    h = run(three_hot_nodes(), maxNoOfPodsToEvictTotal=1)
    proxy = h.runner.profiles[0].evictor
    h.backend.observer = lambda p: seen.append(proxy.total_limit_reached())
    report = h.runner.run_once()
    assert seen == [True]
    assert report.evicted_pods == ["default/a0"]


def test_per_namespace_limit() -> None:
    """maxNoOfPodsToEvictPerNamespace counts each namespace separately."""
    pods = [
        pod(f"{ns}{i}", namespace=ns, node="n1", cpu="100m") for ns in ("x", "y") for i in range(2)
    ]
    source = framework.StaticSource(nodes=fakes.nodes("n1", "n2"), pods=pods)
    h = run(source, maxNoOfPodsToEvictPerNamespace=1)
    report = h.runner.run_once()
    assert report.evicted_pods == ["x/x0", "y/y0"]
    [skip] = [s for s in report.skipped if s.pod == "x/x1"]
    assert skip.detail == "framework: maxNoOfPodsToEvictPerNamespace (1) reached in namespace x"


@pytest.mark.parametrize(
    "outcome",
    [eviction.Outcome.PDB_BLOCKED, eviction.Outcome.NOT_FOUND, eviction.Outcome.FAILED],
    ids=lambda o: o.value,
)
def test_a_refused_eviction_gives_its_slot_back(outcome: eviction.Outcome) -> None:
    """Per node 1: when the first candidate is refused by the API, the next one is admitted."""
    backend = fakes.FakeBackend({"a0": outcome})
    h = run(three_hot_nodes(), backend, maxNoOfPodsToEvictPerNode=1)
    report = h.runner.run_once()
    assert report.evicted_pods == ["default/a1", "default/b0", "default/c0"]


def test_unset_limits_are_unlimited() -> None:
    """No maxNoOfPodsToEvict*: the plugin gets all it asks for."""
    report = run(three_hot_nodes()).runner.run_once()
    assert len(report.evictions) == 6


def test_limit_queries_for_plugins() -> None:
    """Plugins can ask whether a node, namespace or the total is exhausted."""
    answers: list[tuple[bool, bool, bool]] = []

    def probe(name: str, snapshot: Snapshot, handle: Handle) -> None:
        first: objects.Pod = snapshot.pods_on("a")[0]
        handle.evictor.evict(first, plugin=name, reason="probe")
        ev = handle.evictor
        answers.append(
            (
                ev.node_limit_reached("a"),
                ev.namespace_limit_reached("default"),
                ev.total_limit_reached(),
            )
        )

    raw = fakes.policy(
        balance=["Probe"],
        maxNoOfPodsToEvictPerNode=1,
        maxNoOfPodsToEvictPerNamespace=5,
        maxNoOfPodsToEvictTotal=3,
    )
    fakes.harness(raw, fakes.registry_with(Probe=probe), three_hot_nodes()).runner.run_once()
    assert answers == [(True, False, False)]
