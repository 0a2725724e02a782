"""Evictions in background (KEP-1397, gate EvictionsInBackground): requests, limits, metrics."""

from __future__ import annotations

from typing import Any

import pytest

from descheduler import features, framework
from descheduler.evictions import EvictOptions
from descheduler.framework import Handle, Reason, Snapshot
from descheduler.framework import background as bg
from kube import eviction, objects
from tests import builders
from tests.descheduler import fakes

ON = features.Gates.parse("EvictionsInBackground=true")
REQUEST = {bg.ANNOTATION_REQUEST_EVICT_ONLY: ""}
IN_PROGRESS = {bg.ANNOTATION_REQUEST_EVICT_ONLY: "", bg.ANNOTATION_EVICTION_IN_PROGRESS: ""}
EVICTED = "nodeqos_descheduler_pods_evicted_total"


def pod(name: str, node: str = "n1", **overrides: Any) -> objects.Pod:
    return builders.make_pod(name, node=node, namespace="dev", **overrides)


class EvacuatingBackend(fakes.FakeBackend):
    """Answers like KubeVirt's webhook: 429 "Eviction triggered evacuation" for `evacuating`."""

    def __init__(self, *evacuating: str) -> None:
        super().__init__()
        self.evacuating = set(evacuating)

    def evict(self, pod: objects.Pod, options: EvictOptions) -> eviction.Result:
        super().evict(pod, options)
        if pod.name in self.evacuating:
            return eviction.Result(
                eviction.Outcome.PDB_BLOCKED, "Eviction triggered evacuation of VMI dev/x"
            )
        return eviction.Result(eviction.Outcome.EVICTED)


def evict_all(name: str, snapshot: Snapshot, handle: Handle) -> None:
    """Ask for every pod of every node, in name order, whatever the answer."""
    for node in snapshot.nodes:
        for candidate in sorted(snapshot.pods_on(node.name), key=lambda p: p.name):
            handle.evictor.evict(candidate, plugin=name, reason="test")


def run(
    pods: list[objects.Pod],
    backend: fakes.FakeBackend,
    gates: features.Gates = ON,
    **top: Any,
) -> tuple[fakes.Harness, framework.StaticSource]:
    source = framework.StaticSource(nodes=fakes.nodes("n1", "n2"), pods=pods)
    registry = fakes.registry_with(All=evict_all)
    top = {"maxNoOfPodsToEvictPerNode": 100, "maxNoOfPodsToEvictTotal": 100, **top}
    raw = fakes.policy(balance=["All"], **top)
    return fakes.harness(raw, registry, source, backend=backend, gates=gates), source


def four_pods() -> list[objects.Pod]:
    return [pod("p1", annotations=REQUEST), pod("p2", annotations=REQUEST), pod("p3"), pod("p4")]


def test_gate_off_the_answer_is_an_ordinary_refusal() -> None:
    """Without the gate a 429 "triggered evacuation" is a refusal, as before."""
    h, _ = run(four_pods(), EvacuatingBackend("p1", "p2"), gates=features.Gates())
    report = h.runner.run_once()
    assert report.evicted_pods == ["dev/p3", "dev/p4"]
    assert [(s.pod, s.reason_code) for s in report.skipped] == [
        ("dev/p1", Reason.PDB_BLOCKED),
        ("dev/p2", Reason.PDB_BLOCKED),
    ]


def test_two_in_background_two_evicted_and_metrics() -> None:
    """Upstream's cycle 1: p1, p2 answer "evacuation triggered", p3, p4 are evicted."""
    h, _ = run(four_pods(), EvacuatingBackend("p1", "p2"))
    report = h.runner.run_once()
    assert report.evicted_pods == ["dev/p1", "dev/p2", "dev/p3", "dev/p4"]
    assert [e.background for e in report.evictions] == [True, True, False, False]
    assert report.evictions[0].to_dict()["background"] is True
    assert (
        h.sample(
            EVICTED, result="background", strategy="All", profile="p1", namespace="dev", node="n1"
        )
        == 2
    )
    assert (
        h.sample(
            EVICTED, result="success", strategy="All", profile="p1", namespace="dev", node="n1"
        )
        == 2
    )


def test_asking_again_is_a_no_op_seen_as_leaving() -> None:
    """Upstream's cycle 2: p1, p2 still run; asking again calls nothing and counts nothing."""
    backend = EvacuatingBackend("p1", "p2")
    h, source = run(four_pods(), backend)
    h.runner.run_once()
    source.replace(pods=[pod("p1", annotations=REQUEST), pod("p2", annotations=REQUEST)])
    report = h.runner.run_once()
    assert backend.calls == ["dev/p1", "dev/p2", "dev/p3", "dev/p4"]
    assert report.evicted_pods == []
    assert [(s.pod, s.reason_code) for s in report.skipped] == [
        ("dev/p1", Reason.IN_BACKGROUND),
        ("dev/p2", Reason.IN_BACKGROUND),
    ]
    assert (
        h.sample(
            EVICTED, result="background", strategy="All", profile="p1", namespace="dev", node="n1"
        )
        == 2
    )


def test_gone_pods_count_as_success_once() -> None:
    """Once p1 and p2 are deleted, `success` grows by two and nothing is in progress."""
    h, source = run(four_pods(), EvacuatingBackend("p1", "p2"))
    h.runner.run_once()
    source.replace(pods=[])
    h.runner.run_once()
    h.runner.run_once()
    assert (
        h.sample(
            EVICTED, result="success", strategy="All", profile="p1", namespace="dev", node="n1"
        )
        == 4
    )
    assert len(h.runner._core.background or ()) == 0


def test_requests_in_progress_count_against_the_limits_next_cycle() -> None:
    """Total 3: cycle 1 uses it (2 background + 1); cycle 2 still has 2 in progress, so 1 more."""
    pods = [pod("p1", annotations=REQUEST), pod("p2", annotations=REQUEST), pod("p3"), pod("p4")]
    h, source = run(pods, EvacuatingBackend("p1", "p2"), maxNoOfPodsToEvictTotal=3)
    first = h.runner.run_once()
    assert first.evicted_pods == ["dev/p1", "dev/p2", "dev/p3"]
    source.replace(pods=[pods[0], pods[1], pods[3], pod("p5")])
    second = h.runner.run_once()
    assert second.evicted_pods == ["dev/p4"]
    assert ("dev/p5", Reason.LIMIT_REACHED) in [(s.pod, s.reason_code) for s in second.skipped]


def test_per_node_and_namespace_limits_count_them_too() -> None:
    """Per node 1: a request in progress on n1 leaves no room on n1; n2 is free."""
    pods = [pod("v1", annotations=IN_PROGRESS), pod("a"), pod("b", node="n2")]
    h, _ = run(pods, EvacuatingBackend(), maxNoOfPodsToEvictPerNode=1)
    report = h.runner.run_once()
    assert report.evicted_pods == ["dev/b"]
    limited = [s.detail for s in report.skipped if s.reason_code is Reason.LIMIT_REACHED]
    assert limited == [
        "framework: maxNoOfPodsToEvictPerNode (1) reached on node n1, "
        "counting 1 eviction still in progress in background"
    ]
    h2, _ = run(pods, EvacuatingBackend(), maxNoOfPodsToEvictPerNamespace=1)
    assert h2.runner.run_once().evicted_pods == []


@pytest.mark.parametrize(
    ("annotations", "phase", "counted"),
    [
        pytest.param(IN_PROGRESS, "Running", True, id="both-annotations"),
        pytest.param(IN_PROGRESS, "Succeeded", False, id="completed"),
        pytest.param(IN_PROGRESS, "Failed", False, id="failed"),
        pytest.param(REQUEST, "Running", False, id="request-only"),
        pytest.param(
            {bg.ANNOTATION_EVICTION_IN_PROGRESS: ""}, "Running", False, id="in-progress-only"
        ),
    ],
)
def test_found_in_the_cluster(annotations: dict[str, str], phase: str, counted: bool) -> None:
    """After a restart, a pod with both annotations and still running is a request in progress."""
    requests = bg.BackgroundRequests()
    requests.sync([pod("v", annotations=annotations, phase=phase)], fakes.NOW)
    assert len(requests) == (1 if counted else 0)


def test_cancelled_evacuation_is_asked_again() -> None:
    """The in-progress annotation removed (evacuation cancelled): the pod may be asked again."""
    backend = EvacuatingBackend("v")
    h, source = run([pod("v", annotations=IN_PROGRESS)], backend)
    h.runner.run_once()
    assert backend.calls == []
    source.replace(pods=[pod("v", annotations=REQUEST)])
    h.runner.run_once()
    assert backend.calls == ["dev/v"]


def test_assumed_request_dropped_after_ten_minutes() -> None:
    """Upstream's cache cleanup: an assumed request nobody confirms is forgotten after 10 min."""
    backend = EvacuatingBackend("p1")
    h, _ = run([pod("p1", annotations=REQUEST)], backend)
    h.runner.run_once()
    h.clock.advance(minutes=10)
    h.runner.run_once()
    assert backend.calls == ["dev/p1"]
    h.clock.advance(seconds=1)
    h.runner.run_once()
    assert backend.calls == ["dev/p1", "dev/p1"]


def test_confirmed_request_outlives_the_timeout() -> None:
    """A request the pod confirms (in-progress annotation) stays until the pod is gone."""
    backend = EvacuatingBackend("p1")
    h, source = run([pod("p1", annotations=REQUEST)], backend)
    h.runner.run_once()
    source.replace(pods=[pod("p1", annotations=IN_PROGRESS)])
    h.clock.advance(minutes=30)
    h.runner.run_once()
    assert backend.calls == ["dev/p1"]


def test_completed_pod_answer_is_not_tracked() -> None:
    """A Failed pod answering "triggered evacuation" is let go but not kept in progress."""
    backend = EvacuatingBackend("p1")
    h, _ = run([pod("p1", annotations=REQUEST, phase="Failed")], backend)
    assert h.runner.run_once().evicted_pods == ["dev/p1"]
    assert len(h.runner._core.background or ()) == 0


def test_unannotated_pod_answer_is_a_refusal() -> None:
    """The same 429 text from a pod without request-evict-only is an ordinary refusal."""
    h, _ = run([pod("p1")], EvacuatingBackend("p1"))
    report = h.runner.run_once()
    assert report.evicted_pods == []
    assert report.skipped[0].reason_code is Reason.PDB_BLOCKED


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param(
            "Nope=true", "unknown gate 'Nope'; known gates: EvictionsInBackground", id="unknown"
        ),
        pytest.param(
            "EvictionsInBackground=yes", "is not EvictionsInBackground=true|false", id="value"
        ),
    ],
)
def test_feature_gates_refuse_bad_items(text: str, problem: str) -> None:
    """--feature-gates names the bad item and what is accepted."""
    with pytest.raises(ValueError, match=problem.replace("|", r"\|")):
        features.Gates.parse(text)


def test_feature_gate_default_is_off() -> None:
    """EvictionsInBackground is Alpha and off unless turned on, as upstream."""
    assert not features.Gates().enabled(features.EVICTIONS_IN_BACKGROUND)
    assert features.Gates.parse(" EvictionsInBackground=true ").enabled("EvictionsInBackground")


def test_the_daemon_hands_the_gates_to_the_runner() -> None:
    """--feature-gates reaches the evictor: the daemon's runner tracks requests only when on."""
    from descheduler import config, plugins
    from descheduler.app import daemon, simulate

    cfg = config.decode_configuration(fakes.policy(), plugins=plugins.in_tree())

    def build(gates: features.Gates) -> framework.Runner:
        return daemon._build_runner(
            cfg,
            plugins.registry(),
            framework.StaticSource(),
            simulate.NoEvictions(),
            None,
            gates=gates,
        )

    assert build(ON)._core.background is not None
    assert build(features.Gates())._core.background is None
