"""kubernetes-sigs/descheduler PodLifeTime, case by case from its test tables.

Source: kubernetes-sigs/descheduler
`pkg/framework/plugins/podlifetime/pod_lifetime_test.go`. The reference runs
each row with DefaultEvictor `ignorePvcPods` and `nodeFit` as the row sets them
(off otherwise), the row's eviction caps, and the clock at "now"; its pods have
no status unless the row gives one, and are created "now" (`newer`), in 2009
(`older`) or at the row's offset. Rows check the number of evictions and, where
listed, which pods. TestValidation's rows check which args are refused.
Single-node rows get an empty spare node (`reference.with_spare`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from descheduler import config, plugins
from descheduler.config import ConfigError
from kube import objects
from tests.conformance import reference as ref
from tests.conformance.reference import (
    conditions,
    container_state,
    created,
    no_creation,
    no_status,
    node,
    owners,
    phase,
    pvc,
    rs_owner,
    same,
    status,
)

TITLE = "descheduler PodLifeTime"
FILE = "kubernetes-sigs/descheduler pkg/framework/plugins/podlifetime/pod_lifetime_test.go"
NOW = ref.NOW
OLDER = datetime(2009, 11, 10, 23, 0, tzinfo=UTC)
NEWER = NOW
OLD_TRANSITION = objects.format_time(NOW - timedelta(hours=2))
NEW_TRANSITION = objects.format_time(NOW - timedelta(minutes=1))
NODE1 = [node("n1", 2000, 3000, 10)]
NODE = [node("node1", 2000, 3000, 10)]
JOB = owners(("Job", "job1", ""))
LIFE = {"maxPodLifeTimeSeconds": 600}


def p1(name: str, when: datetime, *setters: Any, owned: bool = True) -> objects.Pod:
    """`buildTestPodForNode1` (100m, no status), with an RS owner unless `owned` is off."""
    owner = (rs_owner,) if owned else ()
    return ref.pod(name, 100, 0, "n1", no_status, created(when), *owner, *setters)


def pending(name: str, when: datetime, *setters: Any) -> objects.Pod:
    """`buildTestPodWithRSOwnerRefWithPendingPhaseForNode1`."""
    return p1(name, when, phase("Pending"), *setters)


def bp(name: str, *setters: Any) -> objects.Pod:
    """`buildPod`: 1m/1 byte on node1, ReplicaSet-owned, no creation time, no status."""
    return ref.pod(name, 1, 1, "node1", no_status, no_creation, rs_owner, *setters)


def waiting(reason: str, field: str = "containerStatuses") -> Any:
    return container_state(field, waiting={"reason": reason})


def terminated(field: str = "containerStatuses", **how: Any) -> Any:
    return container_state(field, terminated=how)


def stuck(name: str, reason: str) -> objects.Pod:
    """A 0m RS pod created in 2009 whose one container waits with `reason`."""
    return ref.pod(name, 0, 0, "n1", no_status, rs_owner, created(OLDER), waiting(reason))


def waiting_row(
    reason: str, expected: int, *, field: str = "containerStatuses", **more: Any
) -> Any:
    args = {**LIFE, "states": [more.pop("state", reason)], **more}
    return args, NODE1, [pending("p9", OLDER, waiting(reason, field))], {}, same(expected)


def case(
    test: str,
    name: str,
    args: Mapping[str, Any],
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    expect: ref.Expect,
    **settings: Any,
) -> Any:
    return pytest.param(args, nodes, pods, settings, expect, id=f"{test}/{name}")


CASES = [
    case(
        "TestPodLifeTime",
        "No pod should be evicted since pod terminating",
        {**LIFE, "labelSelector": {"matchLabels": {"foo": "bar"}}},
        NODE1,
        [p1("p14", OLDER, ref.terminating), p1("p15", OLDER, ref.terminating)],
        same(0),
    ),
    case(
        "TestPodLifeTime_EvictorConfiguration",
        "Does not evict pvc pods with ignorePvcPods set to true",
        LIFE,
        NODE1,
        [p1("p11", OLDER, pvc)],
        same(0),
        ignorePvcPods=True,
    ),
    case(
        "TestPodLifeTime_EvictorConfiguration",
        "Evicts pvc pods with ignorePvcPods set to false (or unset)",
        LIFE,
        NODE1,
        [p1("p11", OLDER, pvc)],
        same(1),
    ),
    case(
        "TestPodLifeTime_GenericFiltering",
        "1 pod matching label selector should be evicted",
        {**LIFE, "labelSelector": {"matchLabels": {"foo": "bar"}}},
        NODE1,
        [p1("p12", OLDER, ref.labels(foo="bar")), p1("p13", OLDER, ref.labels(foo="bar1"))],
        same(("p12",)),
    ),
    case(
        "TestPodLifeTime_EvictionLimits",
        "2 Oldest pods should be evicted when maxPodsToEvictPerNode and maxPodsToEvictPerNamespace are not set",
        LIFE,
        NODE1,
        [p1("p1", NEWER), p1("p2", OLDER), pending("p9", OLDER)],
        same(("p2", "p9")),
    ),
    case(
        "TestPodLifeTime_EvictionLimits",
        "1 Oldest pod should be evicted when maxPodsToEvictPerNamespace is set to 1",
        LIFE,
        NODE1,
        [p1("p1", NEWER), p1("p2", OLDER)],
        same(("p2",)),
        maxNoOfPodsToEvictPerNamespace=1,
    ),
    case(
        "TestPodLifeTime_EvictionLimits",
        "1 Oldest pod should be evicted when maxPodsToEvictTotal is set to 1",
        LIFE,
        NODE1,
        [p1("p1", NEWER), p1("p2", OLDER)],
        same(("p2",)),
        maxNoOfPodsToEvictPerNamespace=2,
        maxNoOfPodsToEvictTotal=1,
    ),
    case(
        "TestPodLifeTime_EvictionLimits",
        "1 Oldest pod should be evicted when maxPodsToEvictPerNode is set to 1",
        LIFE,
        NODE1,
        [p1("p1", NEWER), p1("p2", OLDER)],
        same(("p2",)),
        maxNoOfPodsToEvictPerNode=1,
    ),
    case(
        "TestPodLifeTime_ContainerWaitingReasons",
        "Two pods, one with ContainerCreating state. 1 should be evicted.",
        {**LIFE, "states": ["ContainerCreating"]},
        NODE1,
        [pending("p9", OLDER), stuck("container-creating-stuck", "ContainerCreating")],
        same(1),
    ),
    case(
        "TestPodLifeTime_ContainerWaitingReasons",
        "Two pods, one with PodInitializing state. 1 should be evicted.",
        {**LIFE, "states": ["PodInitializing"]},
        NODE1,
        [pending("p9", OLDER), stuck("pod-initializing-stuck", "PodInitializing")],
        same(1),
    ),
    *(
        pytest.param(
            *waiting_row(reason, 1),
            id=f"TestPodLifeTime_ContainerWaitingReasons/1 pod with container status {reason} should be evicted",
        )
        for reason in (
            "ImagePullBackOff",
            "CrashLoopBackOff",
            "CreateContainerConfigError",
            "ErrImagePull",
            "CreateContainerError",
            "InvalidImageName",
        )
    ),
    pytest.param(
        *waiting_row("CreateContainerError", 0, field="initContainerStatuses"),
        id="TestPodLifeTime_ContainerWaitingReasons/1 pod with init container status CreateContainerError "
        "should not be evicted without includingInitContainers",
    ),
    pytest.param(
        *waiting_row(
            "CreateContainerError", 1, field="initContainerStatuses", includingInitContainers=True
        ),
        id="TestPodLifeTime_ContainerWaitingReasons/1 pod with init container status CreateContainerError "
        "should be evicted with includingInitContainers",
    ),
    pytest.param(
        *waiting_row("CreateContainerError", 0, field="ephemeralContainerStatuses"),
        id="TestPodLifeTime_ContainerWaitingReasons/1 pod with ephemeral container status "
        "CreateContainerError should not be evicted without includingEphemeralContainers",
    ),
    pytest.param(
        *waiting_row(
            "CreateContainerError",
            1,
            field="ephemeralContainerStatuses",
            includingEphemeralContainers=True,
        ),
        id="TestPodLifeTime_ContainerWaitingReasons/1 pod with ephemeral container status "
        "CreateContainerError should be evicted with includingEphemeralContainers",
    ),
    pytest.param(
        *waiting_row("ImagePullBackOff", 0, state="ContainerCreating"),
        id="TestPodLifeTime_ContainerWaitingReasons/1 pod with ImagePullBackOff status should be ignored "
        "when States filter is ContainerCreating",
    ),
    *(
        case(
            "TestPodLifeTime_PodStatusReasons",
            f"1 pod with pod status reason {reason} should be evicted",
            {**LIFE, "states": [reason]},
            NODE1,
            [pending("p9", OLDER, status(reason=reason))],
            same(1),
        )
        for reason in ("NodeLost", "NodeAffinity", "Shutdown", "UnexpectedAdmissionError")
    ),
    case(
        "TestPodLifeTime_AgeThreshold",
        "Two pods in the default namespace, 1 is new and 1 very is old. 1 should be evicted.",
        LIFE,
        NODE1,
        [p1("p1", NEWER), p1("p2", OLDER)],
        same(("p2",)),
    ),
    case(
        "TestPodLifeTime_AgeThreshold",
        "Two pods in the default namespace, 2 are new and 0 are old. 0 should be evicted.",
        LIFE,
        NODE1,
        [p1("p3", NEWER), p1("p4", NEWER)],
        same(0),
    ),
    case(
        "TestPodLifeTime_AgeThreshold",
        "Two pods in the default namespace, 1 created 605 seconds ago. 1 should be evicted.",
        LIFE,
        NODE1,
        [p1("p5", NEWER), p1("p6", NOW - timedelta(seconds=605))],
        same(("p6",)),
    ),
    case(
        "TestPodLifeTime_AgeThreshold",
        "Two pods in the default namespace, 1 created 595 seconds ago. 0 should be evicted.",
        LIFE,
        NODE1,
        [p1("p7", NEWER, owned=False), p1("p8", NOW - timedelta(seconds=595), owned=False)],
        same(0),
    ),
    case(
        "TestPodLifeTime_PodPhaseStates",
        "Two old pods with different states. 1 should be evicted.",
        {**LIFE, "states": ["Pending"]},
        NODE1,
        [pending("p9", OLDER), p1("p10", OLDER, phase("Running"))],
        same(("p9",)),
    ),
    *(
        case(
            "TestPodLifeTime_PodPhaseStates",
            f"1 pod with pod status phase v1.Pod{value} should be evicted",
            {**LIFE, "states": [value]},
            NODE1,
            [p1("p16", OLDER, phase(value))],
            same(1),
        )
        for value in ("Succeeded", "Failed", "Unknown")
    ),
    case(
        "TestStatesWithTerminatedReasons",
        "evict pod with matching terminated reason via states",
        {"states": ["NodeAffinity"]},
        NODE,
        [bp("p1", phase("Failed"), terminated(reason="NodeAffinity"))],
        same(1),
    ),
    case(
        "TestStatesWithTerminatedReasons",
        "evict pod with matching pod status reason via states",
        {"states": ["Shutdown"]},
        NODE,
        [bp("p1", phase("Failed"), status(reason="Shutdown"))],
        same(1),
    ),
    case(
        "TestStatesWithTerminatedReasons",
        "states matches terminated reason on init container",
        {"states": ["CreateContainerConfigError"], "includingInitContainers": True},
        NODE,
        [bp("p1", terminated("initContainerStatuses", reason="CreateContainerConfigError"))],
        same(1),
    ),
    case(
        "TestStatesWithTerminatedReasons",
        "states does not match terminated reason on init container without flag",
        {"states": ["CreateContainerConfigError"]},
        NODE,
        [bp("p1", terminated("initContainerStatuses", reason="CreateContainerConfigError"))],
        same(0),
    ),
    case(
        "TestConditionFiltering",
        "evict pod with matching condition reason",
        {"conditions": [{"reason": "PodCompleted", "status": "True"}]},
        NODE,
        [
            bp(
                "p1",
                conditions(
                    {
                        "type": "Initialized",
                        "status": "True",
                        "reason": "PodCompleted",
                        "lastTransitionTime": OLD_TRANSITION,
                    }
                ),
            ),
            bp(
                "p2",
                conditions(
                    {
                        "type": "Initialized",
                        "status": "True",
                        "reason": "OtherReason",
                        "lastTransitionTime": OLD_TRANSITION,
                    }
                ),
            ),
        ],
        same(("p1",)),
    ),
    case(
        "TestConditionFiltering",
        "evict pod matching condition type only",
        {"conditions": [{"type": "Ready"}]},
        NODE,
        [
            bp(
                "p1",
                conditions(
                    {"type": "Ready", "status": "False", "lastTransitionTime": OLD_TRANSITION}
                ),
            )
        ],
        same(1),
    ),
    case(
        "TestConditionFiltering",
        "no matching conditions, 0 evictions",
        {"conditions": [{"reason": "PodCompleted"}]},
        NODE,
        [bp("p1", conditions({"type": "Ready", "status": "True", "reason": "SomethingElse"}))],
        same(0),
    ),
    case(
        "TestTransitionTimeFiltering",
        "evict pod with old transition time",
        {
            "states": ["Succeeded"],
            "conditions": [
                {
                    "reason": "PodCompleted",
                    "status": "True",
                    "minTimeSinceLastTransitionSeconds": 300,
                }
            ],
        },
        NODE,
        [
            bp(
                "p1",
                phase("Succeeded"),
                conditions(
                    {
                        "type": "Initialized",
                        "status": "True",
                        "reason": "PodCompleted",
                        "lastTransitionTime": OLD_TRANSITION,
                    },
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "PodCompleted",
                        "lastTransitionTime": OLD_TRANSITION,
                    },
                ),
            )
        ],
        same(("p1",)),
    ),
    case(
        "TestTransitionTimeFiltering",
        "do not evict pod with recent transition time",
        {"states": ["Succeeded"], "conditions": [{"minTimeSinceLastTransitionSeconds": 14400}]},
        NODE,
        [
            bp(
                "p1",
                phase("Succeeded"),
                conditions(
                    {"type": "Ready", "status": "False", "lastTransitionTime": NEW_TRANSITION}
                ),
            )
        ],
        same(0),
    ),
    case(
        "TestTransitionTimeFiltering",
        "transition time scoped to matching conditions only",
        {"conditions": [{"reason": "PodCompleted", "minTimeSinceLastTransitionSeconds": 300}]},
        NODE,
        [
            bp(
                "p1",
                conditions(
                    {
                        "type": "Initialized",
                        "status": "",
                        "reason": "PodCompleted",
                        "lastTransitionTime": OLD_TRANSITION,
                    },
                    {
                        "type": "Ready",
                        "status": "",
                        "reason": "OtherReason",
                        "lastTransitionTime": NEW_TRANSITION,
                    },
                ),
            )
        ],
        same(("p1",)),
    ),
    case(
        "TestTransitionTimeFiltering",
        "no conditions on pod, transition time filter returns false",
        {"states": ["Running"], "conditions": [{"minTimeSinceLastTransitionSeconds": 300}]},
        NODE,
        [bp("p1", phase("Running"))],
        same(0),
    ),
    case(
        "TestOwnerKindsFiltering",
        "exclude Job owner kind: Job-owned pod not evicted",
        {"states": ["Failed"], "ownerKinds": {"exclude": ["Job"]}},
        NODE,
        [bp("p1", phase("Failed"), JOB)],
        same(0),
    ),
    case(
        "TestOwnerKindsFiltering",
        "exclude Job owner kind: non-Job pod still evicted",
        {"states": ["Failed"], "ownerKinds": {"exclude": ["Job"]}},
        NODE,
        [bp("p1", phase("Failed"), JOB), bp("p2", phase("Failed"))],
        same(("p2",)),
    ),
    case(
        "TestOwnerKindsFiltering",
        "include only Job owner kind",
        {"states": ["Failed"], "ownerKinds": {"include": ["Job"]}},
        NODE,
        [bp("p1", phase("Failed"), JOB), bp("p2", phase("Failed"))],
        same(("p1",)),
    ),
    case(
        "TestStatesWithEphemeralContainers",
        "states matches terminated reason on ephemeral container",
        {"states": ["OOMKilled"], "includingEphemeralContainers": True},
        NODE,
        [bp("p1", terminated("ephemeralContainerStatuses", reason="OOMKilled"))],
        same(1),
    ),
    case(
        "TestStatesWithEphemeralContainers",
        "states does not match ephemeral container without flag",
        {"states": ["OOMKilled"]},
        NODE,
        [bp("p1", terminated("ephemeralContainerStatuses", reason="OOMKilled"))],
        same(0),
    ),
    case(
        "TestExitCodesFiltering",
        "evict pod with matching exit code",
        {"states": ["Failed"], "exitCodes": [1]},
        NODE,
        [bp("p1", phase("Failed"), terminated(exitCode=1))],
        same(1),
    ),
    case(
        "TestExitCodesFiltering",
        "exit code not matched, 0 evictions",
        {"states": ["Failed"], "exitCodes": [2]},
        NODE,
        [bp("p1", phase("Failed"), terminated(exitCode=1))],
        same(0),
    ),
    case(
        "TestCombinedFilters",
        "user scenario: Succeeded + PodCompleted condition + transition time threshold",
        {
            "states": ["Succeeded"],
            "conditions": [
                {
                    "reason": "PodCompleted",
                    "status": "True",
                    "minTimeSinceLastTransitionSeconds": 300,
                }
            ],
        },
        NODE,
        [
            bp(
                "stale-completed",
                phase("Succeeded"),
                conditions(
                    {
                        "type": "Initialized",
                        "status": "True",
                        "reason": "PodCompleted",
                        "lastTransitionTime": OLD_TRANSITION,
                    },
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "PodCompleted",
                        "lastTransitionTime": OLD_TRANSITION,
                    },
                ),
            ),
            bp(
                "recent-completed",
                phase("Succeeded"),
                conditions(
                    {
                        "type": "Initialized",
                        "status": "True",
                        "reason": "PodCompleted",
                        "lastTransitionTime": NEW_TRANSITION,
                    }
                ),
            ),
            bp("running-pod", phase("Running")),
        ],
        same(("stale-completed",)),
    ),
    case(
        "TestCombinedFilters",
        "failed pod removal compat: Failed + min age + exclude Job",
        {"states": ["Failed"], "maxPodLifeTimeSeconds": 0, "ownerKinds": {"exclude": ["Job"]}},
        NODE,
        [
            bp("failed-rs", phase("Failed"), terminated(reason="Error")),
            bp("failed-job", phase("Failed"), JOB),
        ],
        same(("failed-rs",)),
    ),
]


@pytest.mark.parametrize(("args", "nodes", "pods", "settings", "expect"), CASES)
def test_case(
    args: Mapping[str, Any],
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    settings: Mapping[str, Any],
    expect: ref.Expect,
) -> None:
    """The row's number of evictions (or which pods, where the row names them)."""
    evicted = ref.evictions(
        "deschedule", "PodLifeTime", args, nodes, pods, settings, spare=True, now=NOW
    )
    ref.check(evicted, expect)


VALIDATION = [
    pytest.param({"states": ["Running"]}, same("valid"), id="TestValidation/valid: states set"),
    pytest.param(
        {"conditions": [{"reason": "PodCompleted"}]},
        same("valid"),
        id="TestValidation/valid: conditions set",
    ),
    pytest.param(
        {"maxPodLifeTimeSeconds": 600},
        same("valid"),
        id="TestValidation/valid: maxPodLifeTimeSeconds set",
    ),
    pytest.param(
        {"states": ["Running"], "maxPodLifeTimeSeconds": 600},
        same("valid"),
        id="TestValidation/valid: states with maxPodLifeTimeSeconds",
    ),
    pytest.param(
        {"states": ["Succeeded"], "conditions": [{"reason": "PodCompleted"}]},
        same("valid"),
        id="TestValidation/valid: states with conditions",
    ),
    pytest.param({"exitCodes": [1]}, same("valid"), id="TestValidation/valid: exitCodes only"),
    pytest.param(
        {"conditions": [{"reason": "PodCompleted", "minTimeSinceLastTransitionSeconds": 300}]},
        same("valid"),
        id="TestValidation/valid: condition with minTimeSinceLastTransitionSeconds",
    ),
    pytest.param(
        {"conditions": [{"minTimeSinceLastTransitionSeconds": 300}]},
        same("valid"),
        id="TestValidation/valid: condition with only minTimeSinceLastTransitionSeconds",
    ),
    pytest.param({}, same("error"), id="TestValidation/invalid: no filter criteria"),
    pytest.param(
        {"states": ["Running"], "namespaces": {"include": ["a"], "exclude": ["b"]}},
        same("error"),
        id="TestValidation/invalid: both include and exclude namespaces",
    ),
    pytest.param(
        {"states": ["Running"], "ownerKinds": {"include": ["Job"], "exclude": ["ReplicaSet"]}},
        same("error"),
        id="TestValidation/invalid: both include and exclude ownerKinds",
    ),
    pytest.param(
        {"states": ["NotAState"]}, same("error"), id="TestValidation/invalid: bad state name"
    ),
    pytest.param(
        {"conditions": [{}]}, same("error"), id="TestValidation/invalid: empty condition filter"
    ),
]


@pytest.mark.parametrize(("args", "expect"), VALIDATION)
def test_validation(args: Mapping[str, Any], expect: ref.Expect) -> None:
    """Which args the configuration accepts."""
    profile = ref.Profile(deschedule={"PodLifeTime": args})
    try:
        config.decode_configuration(profile.policy(), plugins=plugins.registry().catalog())
    except ConfigError as err:
        assert expect.wanted == "error", str(err)
        assert "PodLifeTime" in str(err)
        return
    assert expect.wanted == "valid"


ALL = (CASES, VALIDATION)
