"""RemovePodsHavingTooManyRestarts through the runner: counting, states, scope, order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from descheduler import framework, plugins
from descheduler.plugins import removepodshavingtoomanyrestarts as plugin
from kube import objects
from tests import builders
from tests.descheduler import fakes

FIXTURE = Path(__file__).parents[1] / "fixtures" / "descheduler" / "snapshot-deschedule.yaml"
NAME = plugin.NAME
pod = builders.make_pod


def run(args: dict[str, Any], pods: list[objects.Pod], **top: Any) -> framework.CycleReport:
    """One cycle of a profile running only this plugin (and DefaultEvictor) on n1, n2."""
    return fakes.run_plugin(NAME, args, pods, **top)


outcome = fakes.outcome


def status(name: str, restarts: int, waiting: str | None = None) -> dict[str, Any]:
    state = {"waiting": {"reason": waiting}} if waiting else {"running": {}}
    return {"name": name, "restartCount": restarts, "state": state}


def crashing(
    name: str,
    restarts: int,
    *,
    waiting: str | None = None,
    init: dict[str, Any] | None = None,
    **overrides: Any,
) -> objects.Pod:
    """A pod whose one container restarted `restarts` times, optionally with an init status."""
    raw = builders.make_pod_dict(
        name, container_statuses=[status("main", restarts, waiting)], **overrides
    )
    if init is not None:
        raw["spec"]["initContainers"] = [{"name": init["name"], "image": "busybox"}]
        raw["status"]["initContainerStatuses"] = [init]
    return objects.Pod.from_api(raw)


TWO_CONTAINERS = [{"name": "a", "image": "x"}, {"name": "b", "image": "x"}]

CASES = [
    pytest.param({"podRestartThreshold": 5}, [crashing("p", 4)], [], id="below-threshold"),
    pytest.param({"podRestartThreshold": 5}, [crashing("p", 5)], ["default/p"], id="at-threshold"),
    pytest.param(
        {"podRestartThreshold": 5},
        [pod("p", containers=TWO_CONTAINERS, restarts=3)],
        ["default/p"],
        id="summed-over-containers",
    ),
    pytest.param(
        {"podRestartThreshold": 5},
        [crashing("p", 1, init=status("setup", 9))],
        [],
        id="init-containers-not-counted",
    ),
    pytest.param(
        {"podRestartThreshold": 5, "includingInitContainers": True},
        [crashing("p", 1, init=status("setup", 4))],
        ["default/p"],
        id="init-containers-counted",
    ),
    pytest.param(
        {"podRestartThreshold": 5, "states": ["CrashLoopBackOff"]},
        [crashing("p", 9), crashing("q", 9, waiting="CrashLoopBackOff")],
        ["default/q"],
        id="states-crashloop",
    ),
    pytest.param(
        {"podRestartThreshold": 5, "states": ["Running"]},
        [crashing("p", 9), crashing("q", 9, phase="Pending")],
        ["default/p"],
        id="states-running-phase",
    ),
    pytest.param(
        {"podRestartThreshold": 5, "states": ["CrashLoopBackOff"]},
        [crashing("p", 9, init=status("setup", 0, "CrashLoopBackOff"))],
        [],
        id="states-init-waiting-not-counted",
    ),
    pytest.param(
        {"podRestartThreshold": 5, "states": ["CrashLoopBackOff"], "includingInitContainers": True},
        [crashing("p", 9, init=status("setup", 0, "CrashLoopBackOff"))],
        ["default/p"],
        id="states-init-waiting-counted",
    ),
    pytest.param(
        {"podRestartThreshold": 5, "namespaces": {"include": ["a"]}},
        [crashing("p", 9, namespace="a"), crashing("q", 9, namespace="b")],
        ["a/p"],
        id="namespaces-include",
    ),
    pytest.param(
        {"podRestartThreshold": 5, "namespaces": {"exclude": ["a"]}},
        [crashing("p", 9, namespace="a"), crashing("q", 9, namespace="b")],
        ["b/q"],
        id="namespaces-exclude",
    ),
    pytest.param(
        {"podRestartThreshold": 5, "labelSelector": {"matchLabels": {"app": "api"}}},
        [crashing("p", 9, labels={"app": "api"}), crashing("q", 9)],
        ["default/p"],
        id="label-selector",
    ),
    pytest.param(
        {"podRestartThreshold": 5},
        [crashing("p", 9, phase="Failed")],
        ["default/p"],
        id="terminal-pods-count",
    ),
]


@pytest.mark.parametrize(("args", "pods", "evicted"), CASES)
def test_cases(args: dict[str, Any], pods: list[objects.Pod], evicted: list[str]) -> None:
    """Pods at or over the threshold, in the listed states, are evicted; nothing else is asked."""
    assert outcome(run(args, pods)) == (evicted, [])


def test_most_restarts_first_across_nodes() -> None:
    """Candidates go most restarts first, whatever their node; then node and name break ties."""
    pods = [
        crashing("a", 6, node="n1"),
        crashing("b", 30, node="n2"),
        crashing("c", 6, node="n2"),
        crashing("d", 6, node="n1"),
    ]
    report = run({"podRestartThreshold": 5}, pods)
    assert outcome(report)[0] == ["default/b", "default/a", "default/d", "default/c"]


def test_limit_keeps_the_worst() -> None:
    """maxNoOfPodsToEvictTotal 1: the pod with most restarts goes; the other is limit_reached."""
    pods = [crashing("a", 6, node="n1"), crashing("b", 30, node="n2")]
    report = run({"podRestartThreshold": 5}, pods, maxNoOfPodsToEvictTotal=1)
    assert outcome(report) == (["default/b"], [("default/a", "limit_reached")])


def test_filtered_candidate_says_why() -> None:
    """A DaemonSet pod over the threshold is filtered by DefaultEvictor."""
    report = run({"podRestartThreshold": 5}, [crashing("p", 9, owner="DaemonSet")])
    assert outcome(report) == ([], [("default/p", "filtered")])
    assert report.skipped[0].detail == "DefaultEvictor: DaemonSet pod"


def test_eviction_reason_counts_the_restarts() -> None:
    """The reason gives the count and the threshold."""
    [evicted] = run({"podRestartThreshold": 5}, [crashing("p", 7)]).evictions
    assert evicted.reason == "7 container restarts (podRestartThreshold 5)"


def test_snapshot_fixture() -> None:
    """The simulate fixture: the pod in CrashLoopBackOff with 25 restarts goes, not the one with 3."""
    items = yaml.safe_load(FIXTURE.read_text())["items"]
    profile = {
        "name": "p1",
        "plugins": {"deschedule": {"enabled": [NAME]}},
        "pluginConfig": [
            {"name": NAME, "args": {"podRestartThreshold": 10, "states": ["CrashLoopBackOff"]}}
        ],
    }
    h = fakes.harness(
        fakes.policy(profiles=[profile], dryRun=True),
        plugins.registry(),
        framework.StaticSource.from_objects(items),
    )
    report = h.runner.run_once()
    assert report.evicted_pods == ["shop/api-8f7e-r5t6y"]
    assert report.skipped == ()
    assert h.backend.calls == []
