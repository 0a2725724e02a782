"""RemoveFailedPods through the runner: age, reasons, exit codes, owner kinds, scope, order."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from descheduler import framework, plugins
from descheduler.plugins import removefailedpods as plugin
from kube import objects
from tests import builders
from tests.descheduler import fakes

FIXTURE = Path(__file__).parents[1] / "fixtures" / "descheduler" / "snapshot-deschedule.yaml"
NAME = plugin.NAME
DAY = 86_400  # fakes.NOW is one day after builders.T0, every pod's default creation time


def run(
    args: dict[str, Any],
    pods: list[objects.Pod],
    *,
    evictor: dict[str, Any] | None = None,
    **top: Any,
) -> framework.CycleReport:
    """One cycle (at fakes.NOW) of a profile running only this plugin (and DefaultEvictor)."""
    return fakes.run_plugin(NAME, args, pods, evictor=evictor, **top)


outcome = fakes.outcome


def failed(
    name: str,
    *,
    reason: str | None = None,
    state: dict[str, Any] | None = None,
    init: dict[str, Any] | None = None,
    **overrides: Any,
) -> objects.Pod:
    """A Failed pod: `status.reason`, its container's state, an init container's state."""
    overrides.setdefault("phase", "Failed")
    if state is not None:
        overrides["container_statuses"] = [{"name": "main", "state": state}]
    raw = builders.make_pod_dict(name, **overrides)
    if reason is not None:
        raw["status"]["reason"] = reason
    if init is not None:
        raw["spec"]["initContainers"] = [{"name": "setup", "image": "busybox"}]
        raw["status"]["initContainerStatuses"] = [{"name": "setup", "state": init}]
    return objects.Pod.from_api(raw)


def exited(reason: str, code: int) -> dict[str, Any]:
    return {"terminated": {"reason": reason, "exitCode": code}}


OOM = exited("OOMKilled", 137)
YOUNG = fakes.NOW - timedelta(minutes=30)

CASES = [
    pytest.param({}, [failed("p", phase="Running")], [], id="running-not-considered"),
    pytest.param({}, [failed("p")], ["default/p"], id="failed-a-day-ago"),
    pytest.param({}, [failed("p", created=YOUNG)], [], id="younger-than-default-hour"),
    pytest.param(
        {"minPodLifetimeSeconds": 0}, [failed("p", created=YOUNG)], ["default/p"], id="min-zero"
    ),
    pytest.param(
        {"minPodLifetimeSeconds": DAY}, [failed("p")], ["default/p"], id="age-equal-is-old-enough"
    ),
    pytest.param({"minPodLifetimeSeconds": DAY + 1}, [failed("p")], [], id="age-just-under"),
    pytest.param(
        {"excludeOwnerKinds": ["Job"]},
        [failed("p", owner="Job"), failed("q")],
        ["default/q"],
        id="exclude-owner-kinds",
    ),
    pytest.param(
        {"reasons": ["NodeAffinity"]},
        [failed("p", reason="NodeAffinity"), failed("q", reason="Evicted")],
        ["default/p"],
        id="reasons-pod-status",
    ),
    pytest.param(
        {"reasons": ["OOMKilled"]},
        [failed("p", state=OOM), failed("q", state=exited("Error", 1))],
        ["default/p"],
        id="reasons-terminated",
    ),
    pytest.param(
        {"reasons": ["CreateContainerConfigError"]},
        [failed("p", state={"waiting": {"reason": "CreateContainerConfigError"}})],
        ["default/p"],
        id="reasons-waiting",
    ),
    pytest.param(
        {"reasons": ["OOMKilled"]}, [failed("p", init=OOM)], [], id="reasons-init-not-counted"
    ),
    pytest.param(
        {"reasons": ["OOMKilled"], "includingInitContainers": True},
        [failed("p", init=OOM)],
        ["default/p"],
        id="reasons-init-counted",
    ),
    pytest.param(
        {"exitCodes": [137]},
        [failed("p", state=OOM), failed("q", state=exited("Error", 1))],
        ["default/p"],
        id="exit-codes",
    ),
    pytest.param(
        {"exitCodes": [137], "includingInitContainers": True},
        [failed("p", init=OOM)],
        ["default/p"],
        id="exit-codes-init-counted",
    ),
    pytest.param(
        {"reasons": ["Error"], "exitCodes": [137]},
        [failed("p", state=OOM), failed("q", state=exited("Error", 137))],
        ["default/q"],
        id="reasons-and-exit-codes",
    ),
    pytest.param(
        {"namespaces": {"include": ["a"]}},
        [failed("p", namespace="a"), failed("q", namespace="b")],
        ["a/p"],
        id="namespaces-include",
    ),
    pytest.param(
        {"namespaces": {"exclude": ["a"]}},
        [failed("p", namespace="a"), failed("q", namespace="b")],
        ["b/q"],
        id="namespaces-exclude",
    ),
    pytest.param(
        {"labelSelector": {"matchLabels": {"job": "nightly"}}},
        [failed("p", labels={"job": "nightly"}), failed("q")],
        ["default/p"],
        id="label-selector",
    ),
]


@pytest.mark.parametrize(("args", "pods", "evicted"), CASES)
def test_cases(args: dict[str, Any], pods: list[objects.Pod], evicted: list[str]) -> None:
    """Failed pods old enough and matching reasons and exit codes are evicted."""
    assert outcome(run(args, pods)) == (evicted, [])


@pytest.mark.parametrize(
    ("evictor", "evicted", "skipped"),
    [
        pytest.param(None, [], [("default/p", "filtered")], id="protected-by-default"),
        pytest.param({"evictFailedBarePods": True}, ["default/p"], [], id="allowed"),
    ],
)
def test_failed_bare_pods(
    evictor: dict[str, Any] | None, evicted: list[str], skipped: list[tuple[str, str]]
) -> None:
    """A failed pod without an owner is DefaultEvictor's to allow (evictFailedBarePods)."""
    assert outcome(run({}, [failed("p", owner=None)], evictor=evictor)) == (evicted, skipped)


def test_oldest_first_and_the_limit_keeps_it() -> None:
    """maxNoOfPodsToEvictTotal 1: the oldest failed pod goes, whatever its node."""
    pods = [failed("a", node="n1"), failed("b", node="n2", created=builders.T0 - timedelta(days=2))]
    report = run({}, pods, maxNoOfPodsToEvictTotal=1)
    assert outcome(report) == (["default/b"], [("default/a", "limit_reached")])


def test_eviction_reason_lists_what_matched() -> None:
    """The reason gives the age and the matching reason and exit code."""
    [evicted] = run(
        {"reasons": ["OOMKilled"], "exitCodes": [137]}, [failed("p", state=OOM)]
    ).evictions
    assert evicted.reason == (
        "Failed, created 86400s ago (minPodLifetimeSeconds 3600); reason OOMKilled; exit code 137"
    )


def test_snapshot_fixture() -> None:
    """The simulate fixture: the Job pod failed yesterday goes; the bare one is protected."""
    items = yaml.safe_load(FIXTURE.read_text())["items"]
    profile = {
        "name": "p1",
        "plugins": {"deschedule": {"enabled": [NAME]}},
        "pluginConfig": [{"name": NAME, "args": {"reasons": ["Error", "OOMKilled"]}}],
    }
    h = fakes.harness(
        fakes.policy(profiles=[profile], dryRun=True),
        plugins.registry(),
        framework.StaticSource.from_objects(items),
    )
    report = h.runner.run_once()
    assert report.evicted_pods == ["batch/report-28591-abcde"]
    assert [(s.pod, s.reason_code.value) for s in report.skipped] == [
        ("batch/oneoff-debug", "filtered")
    ]
    assert h.backend.calls == []
