"""The peers benchmark reads decisions and cycle ends from both descheduler's logs."""

from __future__ import annotations

import pytest

from bench import peers

UPSTREAM_EVICTION = (
    'I1125 09:00:32.736698     740 evictions.go:587] "Evicted pod in dry run mode" '
    'pod="team-00/app-0-7d9c8b-000000" reason="" strategy="PodLifeTime" node="node-00000" '
    'profile="peers"'
)
UPSTREAM_CYCLE_END = (
    'I1125 09:00:19.765038     740 descheduler.go:252] "Number of evictions/requests" '
    "totalEvicted=0 evictionRequests=0"
)
NODEQOS_EVICTION = (
    "2026-11-25 09:00:01,000 INFO descheduler.framework.evictor: [dry-run] evicted pod "
    "team-03/app-9-7d9c8b-00001e from node node-00050 (plugin RemovePodsViolatingNodeTaints, "
    "profile peers): pod does not tolerate taint bench.nodeqos.dev/peers"
)
NODEQOS_CYCLE_END = (
    "2026-11-25 09:00:02,000 INFO descheduler.framework.runner: [dry-run] cycle done in "
    "1.234s: 600 evicted, 10 passed over, 0 plugin errors"
)


@pytest.mark.parametrize(
    ("parse", "line", "expected"),
    [
        pytest.param(
            peers.parse_upstream,
            UPSTREAM_EVICTION,
            peers.Eviction("PodLifeTime", "team-00/app-0-7d9c8b-000000", "node-00000"),
            id="upstream-eviction",
        ),
        pytest.param(peers.parse_upstream, UPSTREAM_CYCLE_END, peers.CycleEnd(), id="upstream-end"),
        pytest.param(
            peers.parse_upstream,
            'I1125 profile.go:387] "Total number of evictions/requests" evictedPods=0',
            None,
            id="upstream-per-extension-point-total-is-not-a-cycle-end",
        ),
        pytest.param(
            peers.parse_nodeqos,
            NODEQOS_EVICTION,
            peers.Eviction(
                "RemovePodsViolatingNodeTaints", "team-03/app-9-7d9c8b-00001e", "node-00050"
            ),
            id="nodeqos-eviction",
        ),
        pytest.param(peers.parse_nodeqos, NODEQOS_CYCLE_END, peers.CycleEnd(), id="nodeqos-end"),
        pytest.param(
            peers.parse_nodeqos,
            "INFO cycle done in 1.0s: 0 evicted",  # a real run: not the dry run measured
            None,
            id="nodeqos-real-run-is-not-measured",
        ),
    ],
)
def test_log_lines(parse: object, line: str, expected: object) -> None:
    """Each log line becomes the event it reports, or nothing."""
    assert parse(line) == expected  # type: ignore[operator]


def test_compare_counts_and_names_the_differences() -> None:
    """Per plugin: both counts, the overlap and the pods only one side picks."""
    ours = {"PodLifeTime": {"a/1": "n1", "a/2": "n2"}, "LowNodeUtilization": {"b/1": "n1"}}
    theirs = {"PodLifeTime": {"a/1": "n1", "a/3": "n2"}}
    result = peers.compare(ours, theirs)
    assert result["PodLifeTime"] == {
        "nodeqos": 2,
        "upstream": 2,
        "both": 1,
        "only_nodeqos": 1,
        "only_upstream": 1,
        "only_nodeqos_examples": ["a/2"],
        "only_upstream_examples": ["a/3"],
        "same": False,
        "same_count_per_node": True,  # a tie broken the other way on n2
        "same_source_nodes": True,
    }
    assert result["LowNodeUtilization"]["only_nodeqos"] == 1
    assert result["LowNodeUtilization"]["same_count_per_node"] is False
    assert result["LowNodeUtilization"]["same_source_nodes"] is False
    assert result["RemoveDuplicates"]["same"] is True  # every plugin of the profile is listed


def test_compare_lists_the_plugins_of_the_profile_asked_for() -> None:
    """The usage profile's comparison lists its one plugin, not the requests profile's four."""
    result = peers.compare(
        {}, {"LowNodeUtilization": {"b/1": "n1"}}, plugins=("LowNodeUtilization",)
    )
    assert list(result) == ["LowNodeUtilization"]
    assert result["LowNodeUtilization"]["same_source_nodes"] is False


def test_first_complete_cycle_ignores_tie_breaks() -> None:
    """Upstream's first dry-run cycle sees part of the cluster; LNU ties never settle."""
    partial = {"PodLifeTime": {"a/1": "n1"}}
    full = {"PodLifeTime": {"a/1": "n1", "a/2": "n2"}, "LowNodeUtilization": {"b/1": "n3"}}
    other_tie = {"PodLifeTime": {"a/1": "n1", "a/2": "n2"}, "LowNodeUtilization": {"b/2": "n3"}}
    run = peers.Measured(1.0, [1.0, 2.0, 3.0], [0.5, 1.0, 1.5], 0, [partial, full, other_tie])
    assert run.first_complete == 1
    assert run.summary()["first_complete_cycle_seconds"] == 2.0
