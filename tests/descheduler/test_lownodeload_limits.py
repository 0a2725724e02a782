"""LowNodeLoad and the eviction caps (pure `plan`): what a `LimitReached` answer stops.

The plugin answers `evictable` with an `outcome.LimitReached` when a cap is
full (through the real Runner: test_lownodeload_plugin_cycles.py). Here the
callback plays the evictor: the total cap stops the plan and counts the
candidates not tried, a node's cap stops that source's drain, a namespace's
cap refuses only the candidate.
"""

from __future__ import annotations

from descheduler.plugins.lownodeload.outcome import Decision, Limit, LimitReached, Role
from kube import objects
from tests.descheduler.test_lownodeload_plan import D1_A, D1_ARGS, Cluster, _summary

# A 3700m (92.5%), H 2900m (72.5%), Z 2850m (71.25%) are hot (high mark 2800m),
# drained in that order; B and C are cool. A is relieved by a900 alone.
THREE_HOT = {
    "A": {"a1000": 1000, "a900": 900, "a1800": 1800},
    "H": {"h2000": 2000, "h900": 900},
    "Z": {"z1000": 1000, "z950": 950, "z900": 900},
    "B": {"b0": 0},
    "C": {"c100": 100},
}
TOTAL = LimitReached(Limit.TOTAL, "maxNoOfPodsToEvictTotal reached")


def test_total_cap_stops_the_plan_and_counts_the_rest() -> None:
    """The candidate refused is recorded; the others of H and all of Z are not tried, but counted."""
    cluster = Cluster(THREE_HOT, pod_kw={"a1800": {"priority": 10}})
    result = cluster.run(D1_ARGS, evictable=lambda pod: TOTAL if cluster.attempts else None)
    assert _summary(result) == [("a900", "B", None), ("h900", None, "limit_reached")]
    assert result.decisions[1].detail == "maxNoOfPodsToEvictTotal reached"
    assert (result.stopped, result.untried) == (TOTAL, 1 + 3)  # h2000; z1000, z950, z900
    assert [p.sources for p in result.pools] == [("A", "H", "Z")]
    roles = {name: report.role for name, report in result.nodes.items()}
    assert roles == {
        "A": Role.SOURCE,
        "H": Role.SOURCE,
        "Z": Role.SOURCE,
        "B": Role.DESTINATION,
        "C": Role.DESTINATION,
    }
    assert result.relieved == ("A",)


def test_total_cap_on_the_last_candidate_leaves_nothing_untried() -> None:
    """Reached at the last candidate: the plan says it stopped, with 0 untried."""
    cluster = Cluster({"A": {"a1000": 1000, "a2700": 2700}, "B": {"b400": 400}})
    answers = {"a1000": "filtered", "a2700": TOTAL}
    result = cluster.run(D1_ARGS, evictable=lambda pod: answers[pod.name])
    assert _summary(result) == [("a1000", None, "filtered"), ("a2700", None, "limit_reached")]
    assert (result.stopped, result.untried) == (TOTAL, 0)


def test_node_cap_stops_only_that_source() -> None:
    """A's cap: its next candidate is refused and A stops; H is drained as usual."""
    cluster = Cluster(
        {
            "A": {"a800": 800, "a700": 700, "a650": 650, "a600": 600, "a550": 550, "a400": 400},
            "H": {"h2000": 2000, "h900": 900},
            "B": {"b0": 0},
            "C": {"c100": 100},
        }
    )
    full = LimitReached(Limit.NODE, "maxNoOfPodsToEvictPerNode reached on node A")

    def evictable(pod: objects.Pod) -> LimitReached | None:
        from_a = [d for d in cluster.attempts if d.source == "A"]
        return full if pod.node_name == "A" and from_a else None

    result = cluster.run(D1_ARGS, evictable=evictable)
    # A (900m over, no pod covers it): a800 goes; a400 would cover the 100m left
    assert _summary(result) == [
        ("a800", "B", None),
        ("a400", None, "limit_reached"),
        ("h900", "C", None),
    ]
    assert (result.stopped, result.untried) == (None, 0)


def test_namespace_cap_refuses_only_the_candidate() -> None:
    """A namespace's cap: the next candidate (in another namespace, say) is tried."""
    cluster = Cluster({"A": D1_A, "B": {"b400": 400}})
    full = LimitReached(Limit.NAMESPACE, "maxNoOfPodsToEvictPerNamespace reached in namespace x")
    result = cluster.run(D1_ARGS, evictable=lambda pod: full if pod.name == "a1000" else None)
    assert _summary(result) == [("a1000", None, "limit_reached"), ("a1200", "B", None)]
    assert (result.stopped, result.untried) == (None, 0)


def test_a_bare_limit_reached_code_stops_nothing() -> None:
    """An evictor refusal of an attempted eviction (a plain code) is per candidate, as before."""
    cluster = Cluster({"A": D1_A, "B": {"b400": 400}})

    def refuse(decision: Decision) -> str | None:
        return "limit_reached" if decision.pod.name == "a1000" else None

    result = cluster.run(D1_ARGS, refuse=refuse)
    assert _summary(result) == [("a1000", "B", "limit_reached"), ("a1200", "B", None)]
    assert result.stopped is None
