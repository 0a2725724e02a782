"""The evictor's own rules, against a fake Eviction API: dedupe, rate limit, PDB backoff, Events."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from kube import eviction
from qosmanager import Decision, Evictor, EvictorConfig, QoSMetrics
from tests.qosmanager.builders import BE, FakeClock, FakeEvictionAPI, make_pod, pod_meta

REASON = "BEMemoryEvict"


def be(name: str, **kwargs: object) -> object:
    return pod_meta(make_pod(name, qos=BE, **kwargs))  # type: ignore[arg-type]


def evictor(
    api: FakeEvictionAPI, metrics: QoSMetrics, clock: FakeClock, **config: float
) -> Evictor:
    return Evictor(api, metrics=metrics, clock=clock, config=EvictorConfig(**config))  # type: ignore[arg-type]


def test_eviction_records_an_event_and_counts(
    metrics: QoSMetrics, clock: FakeClock, registry: CollectorRegistry
) -> None:
    """An evicted pod gets a Warning Event "Evicted" and the reason's counter goes up."""
    api = FakeEvictionAPI()
    assert evictor(api, metrics, clock).evict(be("p1"), REASON, "memory high") is Decision.EVICTED
    assert api.events == [("p1", "Warning", "Evicted")]
    assert registry.get_sample_value("nodeqos_agent_pod_evictions_total", {"reason": REASON}) == 1


def test_pod_already_being_evicted_is_not_evicted_again(
    metrics: QoSMetrics, clock: FakeClock
) -> None:
    """A pod evicted a moment ago, or already terminating, costs no API call."""
    api = FakeEvictionAPI()
    ev = evictor(api, metrics, clock)
    ev.evict(be("p1"), REASON, "")
    assert ev.evict(be("p1"), REASON, "") is Decision.ALREADY_EVICTING
    terminating = make_pod("p2", qos=BE)
    terminating["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert ev.evict(pod_meta(terminating), REASON, "") is Decision.ALREADY_EVICTING
    assert api.calls == ["p1"]


def test_global_rate_limit_spans_strategies(
    metrics: QoSMetrics, clock: FakeClock, registry: CollectorRegistry
) -> None:
    """At most max_evictions API calls per window for the node, whichever strategy asks."""
    api = FakeEvictionAPI()
    ev = evictor(api, metrics, clock, max_evictions=2, window_seconds=60.0)
    assert ev.evict(be("p1"), "BEMemoryEvict", "") is Decision.EVICTED
    assert ev.evict(be("p2"), "BECPUEvict", "") is Decision.EVICTED
    assert ev.evict(be("p3"), "BEMemoryEvict", "") is Decision.RATE_LIMITED
    clock.advance(60.0)
    assert ev.evict(be("p3"), "BEMemoryEvict", "") is Decision.EVICTED
    assert (
        registry.get_sample_value(
            "nodeqos_agent_pod_eviction_attempts_total",
            {"reason": "BEMemoryEvict", "outcome": "rate_limited"},
        )
        == 1
    )


def test_pdb_refusal_backs_off_per_pod_and_doubles(
    metrics: QoSMetrics, clock: FakeClock, registry: CollectorRegistry
) -> None:
    """A 429 is pdb_blocked; the pod is left alone for 30 s, then 60 s after a second 429."""
    api = FakeEvictionAPI({"guarded": eviction.Outcome.PDB_BLOCKED})
    ev = evictor(api, metrics, clock)
    guarded = be("guarded")
    assert ev.evict(guarded, REASON, "") is Decision.PDB_BLOCKED
    assert api.events == [("guarded", "Warning", "EvictionBlocked")]
    clock.advance(29.0)
    assert ev.evict(guarded, REASON, "") is Decision.BACKOFF
    assert ev.evict(be("other"), REASON, "") is Decision.EVICTED  # others are not held up
    clock.advance(1.0)
    assert ev.evict(guarded, REASON, "") is Decision.PDB_BLOCKED
    assert ev.backoff_remaining(guarded.uid) == pytest.approx(60.0)
    assert api.calls == ["guarded", "other", "guarded"]
    assert (
        registry.get_sample_value(
            "nodeqos_agent_pod_eviction_attempts_total",
            {"reason": REASON, "outcome": "pdb_blocked"},
        )
        == 2
    )
    assert registry.get_sample_value("nodeqos_agent_pod_evictions_total", {"reason": REASON}) == 1


@pytest.mark.parametrize(
    ("outcome", "decision"),
    [
        pytest.param(eviction.Outcome.NOT_FOUND, Decision.NOT_FOUND, id="gone"),
        pytest.param(eviction.Outcome.UID_MISMATCH, Decision.UID_MISMATCH, id="namesake"),
        pytest.param(eviction.Outcome.FORBIDDEN, Decision.FORBIDDEN, id="rbac"),
        pytest.param(eviction.Outcome.UNAVAILABLE, Decision.UNAVAILABLE, id="server-down"),
    ],
)
def test_api_outcomes_map_to_decisions_without_events(
    metrics: QoSMetrics, clock: FakeClock, outcome: eviction.Outcome, decision: Decision
) -> None:
    """Other API answers are reported as such and leave no Event behind."""
    api = FakeEvictionAPI({"p": outcome})
    assert evictor(api, metrics, clock).evict(be("p"), REASON, "") is decision
    assert api.events == []
