"""PodLifeTime through the runner: each criterion, their conjunction, scope, order."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from descheduler import framework, plugins
from descheduler.plugins import podlifetime as plugin
from kube import objects
from tests import builders
from tests.descheduler import fakes

FIXTURE = Path(__file__).parents[1] / "fixtures" / "descheduler" / "snapshot-deschedule.yaml"
NAME = plugin.NAME
DAY = 86_400  # fakes.NOW is one day after builders.T0, every pod's default creation time
pod = builders.make_pod


def run(args: dict[str, Any], pods: list[objects.Pod], **top: Any) -> framework.CycleReport:
    """One cycle (at fakes.NOW) of a profile running only this plugin (and DefaultEvictor)."""
    return fakes.run_plugin(NAME, args, pods, **top)


outcome = fakes.outcome


def shaped(
    name: str,
    *,
    reason: str | None = None,
    terminated: tuple[str, int] | None = None,
    init: dict[str, Any] | None = None,
    **overrides: Any,
) -> objects.Pod:
    """A pod with a `status.reason`, a terminated container (reason, exit code), an init status."""
    if terminated is not None:
        state = {"terminated": {"reason": terminated[0], "exitCode": terminated[1]}}
        overrides["container_statuses"] = [{"name": "main", "state": state}]
    raw = builders.make_pod_dict(name, **overrides)
    if reason is not None:
        raw["status"]["reason"] = reason
    if init is not None:
        raw["spec"]["initContainers"] = [{"name": "setup", "image": "busybox"}]
        raw["status"]["initContainerStatuses"] = [{"name": "setup", "state": init}]
    return objects.Pod.from_api(raw)


INIT_WAITING = {"waiting": {"reason": "ImagePullBackOff"}}
INIT_EXITED = {"terminated": {"reason": "Error", "exitCode": 3}}

CASES = [
    pytest.param({"maxPodLifeTimeSeconds": DAY}, [pod("p")], [], id="age-equal-is-not-over"),
    pytest.param({"maxPodLifeTimeSeconds": DAY - 1}, [pod("p")], ["default/p"], id="age-over"),
    pytest.param(
        {"maxPodLifeTimeSeconds": 0},
        [pod("p", created=fakes.NOW + timedelta(minutes=5))],
        [],
        id="created-in-the-future",
    ),
    pytest.param(
        {"maxPodLifeTimeSeconds": 10 * 365 * DAY},
        [pod("p", created=None)],
        ["default/p"],
        id="no-creation-time-is-oldest",
    ),
    pytest.param(
        {"states": ["Pending"]},
        [pod("p", phase="Pending"), pod("q")],
        ["default/p"],
        id="states-phase",
    ),
    pytest.param(
        {"states": ["NodeAffinity"]},
        [shaped("p", phase="Failed", reason="NodeAffinity")],
        ["default/p"],
        id="states-pod-reason",
    ),
    pytest.param(
        {"states": ["ContainerCreating"]},
        [pod("p", phase="Pending")],
        ["default/p"],
        id="states-waiting-reason",
    ),
    pytest.param(
        {"states": ["OOMKilled"]},
        [shaped("p", terminated=("OOMKilled", 137))],
        ["default/p"],
        id="states-terminated-reason",
    ),
    pytest.param(
        {"states": ["ImagePullBackOff"]},
        [shaped("p", phase="Pending", init=INIT_WAITING)],
        [],
        id="states-init-not-counted",
    ),
    pytest.param(
        {"states": ["ImagePullBackOff"], "includingInitContainers": True},
        [shaped("p", phase="Pending", init=INIT_WAITING)],
        ["default/p"],
        id="states-init-counted",
    ),
    pytest.param(
        {"conditions": [{"type": "Ready", "status": "False"}]},
        [pod("p", ready=False), pod("q")],
        ["default/p"],
        id="conditions-type-and-status",
    ),
    pytest.param(
        {"conditions": [{"status": "False"}]},
        [pod("p", ready=False), pod("q")],
        ["default/p"],
        id="conditions-status-only",
    ),
    pytest.param(
        {"exitCodes": [137]},
        [shaped("p", terminated=("OOMKilled", 137)), shaped("q", terminated=("Error", 1))],
        ["default/p"],
        id="exit-codes",
    ),
    pytest.param(
        {"exitCodes": [3]}, [shaped("p", init=INIT_EXITED)], [], id="exit-codes-init-not-counted"
    ),
    pytest.param(
        {"exitCodes": [3], "includingInitContainers": True},
        [shaped("p", init=INIT_EXITED)],
        ["default/p"],
        id="exit-codes-init-counted",
    ),
    pytest.param(
        {"maxPodLifeTimeSeconds": 60, "ownerKinds": {"include": ["Job"]}},
        [pod("p", owner="Job"), pod("q"), pod("r", owner=None)],
        ["default/p"],
        id="owner-kinds-include",
    ),
    pytest.param(
        {"maxPodLifeTimeSeconds": 60, "ownerKinds": {"exclude": ["Job"]}},
        [pod("p", owner="Job"), pod("q")],
        ["default/q"],
        id="owner-kinds-exclude",
    ),
    pytest.param(
        {"maxPodLifeTimeSeconds": 60, "states": ["Pending"]},
        [pod("p", phase="Pending"), pod("q"), pod("r", phase="Pending", created=fakes.NOW)],
        ["default/p"],
        id="criteria-are-anded",
    ),
    pytest.param(
        {"maxPodLifeTimeSeconds": 60, "namespaces": {"include": ["a"]}},
        [pod("p", namespace="a"), pod("q", namespace="b")],
        ["a/p"],
        id="namespaces-include",
    ),
    pytest.param(
        {"maxPodLifeTimeSeconds": 60, "namespaces": {"exclude": ["a"]}},
        [pod("p", namespace="a"), pod("q", namespace="b")],
        ["b/q"],
        id="namespaces-exclude",
    ),
    pytest.param(
        {"maxPodLifeTimeSeconds": 60, "labelSelector": {"matchLabels": {"app": "old"}}},
        [pod("p", labels={"app": "old"}), pod("q")],
        ["default/p"],
        id="label-selector",
    ),
]


@pytest.mark.parametrize(("args", "pods", "evicted"), CASES)
def test_cases(args: dict[str, Any], pods: list[objects.Pod], evicted: list[str]) -> None:
    """Pods matching every configured criterion are evicted; nothing else is asked."""
    assert outcome(run(args, pods)) == (evicted, [])


def test_oldest_first_across_nodes() -> None:
    """Candidates go oldest first, whatever their node; pods without a timestamp first."""
    pods = [
        pod("a", node="n1", created=builders.T0),
        pod("b", node="n2", created=builders.T0 - timedelta(days=3)),
        pod("c", node="n1", created=None, phase="Pending"),
        pod("d", node="n2", created=builders.T0, phase="Pending"),
    ]
    report = run({"states": ["Running", "Pending"]}, pods)
    assert outcome(report)[0] == ["default/c", "default/b", "default/a", "default/d"]


def test_limit_keeps_the_oldest() -> None:
    """maxNoOfPodsToEvictTotal 1: the oldest goes; the other is limit_reached."""
    pods = [pod("a", node="n1"), pod("b", node="n2", created=builders.T0 - timedelta(hours=1))]
    report = run({"maxPodLifeTimeSeconds": 60}, pods, maxNoOfPodsToEvictTotal=1)
    assert outcome(report) == (["default/b"], [("default/a", "limit_reached")])


def test_filtered_candidate_says_why() -> None:
    """A bare pod past its lifetime is filtered by DefaultEvictor."""
    report = run({"maxPodLifeTimeSeconds": 60}, [pod("p", owner=None)])
    assert outcome(report) == ([], [("default/p", "filtered")])


def test_eviction_reason_lists_what_matched() -> None:
    """The reason gives the age and each matching criterion."""
    args = {"maxPodLifeTimeSeconds": 3600, "states": ["OOMKilled"], "exitCodes": [137]}
    [evicted] = run(args, [shaped("p", terminated=("OOMKilled", 137))]).evictions
    assert evicted.reason == (
        "age 86400s exceeds maxPodLifeTimeSeconds 3600; state OOMKilled; exit code 137"
    )


def with_conditions(name: str, *conditions: dict[str, Any]) -> objects.Pod:
    raw = builders.make_pod_dict(name)
    raw["status"]["conditions"] = list(conditions)
    return objects.Pod.from_api(raw)


HOUR_AGO = objects.format_time(fakes.NOW - timedelta(hours=1))
MINUTE_AGO = objects.format_time(fakes.NOW - timedelta(minutes=1))


def test_condition_reason_and_transition_time() -> None:
    """A filter's reason must equal the condition's; its minimum idle time is since the transition."""
    completed = {"type": "Initialized", "status": "True", "reason": "PodCompleted"}
    pods = [
        with_conditions("stale", {**completed, "lastTransitionTime": HOUR_AGO}),
        with_conditions("recent", {**completed, "lastTransitionTime": MINUTE_AGO}),
        with_conditions("other", {**completed, "reason": "Other", "lastTransitionTime": HOUR_AGO}),
        with_conditions("no-time", completed),
    ]
    args = {"conditions": [{"reason": "PodCompleted", "minTimeSinceLastTransitionSeconds": 300}]}
    [evicted] = run(args, pods).evictions
    assert (evicted.pod, evicted.reason) == (
        "default/stale",
        "condition Initialized=True (PodCompleted)",
    )


def test_states_reach_ephemeral_containers_only_when_asked() -> None:
    """includingEphemeralContainers: an ephemeral container's terminated reason is a state."""
    raw = builders.make_pod_dict("debugged")
    raw["status"]["ephemeralContainerStatuses"] = [
        {"name": "debug", "state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}
    ]
    debugged = objects.Pod.from_api(raw)
    assert run({"states": ["OOMKilled"]}, [debugged]).evictions == ()
    with_flag = {"states": ["OOMKilled"], "includingEphemeralContainers": True}
    assert run(with_flag, [debugged]).evicted_pods == ["default/debugged"]


def test_snapshot_fixture() -> None:
    """The simulate fixture: only the pod created a month ago is past seven days."""
    items = yaml.safe_load(FIXTURE.read_text())["items"]
    profile = {
        "name": "p1",
        "plugins": {"deschedule": {"enabled": [NAME]}},
        "pluginConfig": [{"name": NAME, "args": {"maxPodLifeTimeSeconds": 7 * DAY}}],
    }
    h = fakes.harness(
        fakes.policy(profiles=[profile], dryRun=True),
        plugins.registry(),
        framework.StaticSource.from_objects(items),
    )
    report = h.runner.run_once()
    assert report.evicted_pods == ["batch/legacy-worker-6f5d-k8s2t"]
    assert report.skipped == ()
    assert h.backend.calls == []
