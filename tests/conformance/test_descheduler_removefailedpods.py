"""kubernetes-sigs/descheduler RemoveFailedPods, case by case from its test table.

Source: kubernetes-sigs/descheduler
`pkg/framework/plugins/removefailedpods/failedpods_test.go` (TestRemoveFailedPods).
Rows run with DefaultEvictor `nodeFit` as the row sets it, no caps, pods
created "now" and owned by a ReplicaSet; a pod with a container state is
Failed (`newPodStatus`). Rows count evictions. Single-node rows get an empty,
unschedulable spare node (`reference.with_spare`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from kube import objects
from tests.conformance import reference as ref
from tests.conformance.reference import rs_owner, same

TITLE = "descheduler RemoveFailedPods"
FILE = "kubernetes-sigs/descheduler pkg/framework/plugins/removefailedpods/failedpods_test.go"
TEST = "TestRemoveFailedPods"
NODE1 = [ref.node("node1", 2000, 3000, 10)]


def pod(
    name: str,
    node_name: str = "node1",
    *,
    init: Mapping[str, Any] | None = None,
    main: Mapping[str, Any] | None = None,
    reason: str = "",
    phase: str = "",
    deleting: bool = False,
) -> objects.Pod:
    """`buildTestPod(name, node, newPodStatus(reason, phase, init, main), deletion)`."""
    status: dict[str, Any] = {"reason": reason, "phase": phase}
    if init is not None:
        status |= {"initContainerStatuses": [{"name": "i", "state": dict(init)}], "phase": "Failed"}
    if main is not None:
        status |= {"containerStatuses": [{"name": "c", "state": dict(main)}], "phase": "Failed"}
    setters = [ref.no_status, ref.status(**status), rs_owner, ref.created(ref.NOW)]
    if deleting:
        setters.append(ref.terminating)
    return ref.pod(name, 1, 1, node_name, *setters)


def terminated(**how: Any) -> dict[str, Any]:
    return {"terminated": how}


def waiting(reason: str) -> dict[str, Any]:
    return {"waiting": {"reason": reason}}


def case(
    name: str,
    args: Mapping[str, Any],
    pods: Sequence[objects.Pod],
    expected: int,
    nodes: Sequence[objects.Node] = NODE1,
    node_fit: bool = False,
) -> Any:
    return pytest.param(args, nodes, pods, node_fit, same(expected), id=f"{TEST}/{name}")


NODE_AFFINITY = terminated(reason="NodeAffinity")
CONFIG_ERROR = terminated(reason="CreateContainerConfigError")
CASES = [
    case("default empty args, 0 failures, 0 evictions", {}, [], 0),
    case("0 failures, 0 evictions", {}, [], 0),
    case(
        "1 container terminated with reason NodeAffinity, 1 eviction",
        {},
        [pod("p1", main=NODE_AFFINITY)],
        1,
    ),
    case(
        "1 container terminated with exitCode 1, 1 eviction",
        {"exitCodes": [1]},
        [pod("p1", main=terminated(exitCode=1))],
        1,
    ),
    case(
        "1 container terminated with exitCode 1, reason NodeAffinity, 1 eviction",
        {"exitCodes": [1]},
        [pod("p1", main=terminated(reason="NodeAffinity", exitCode=1))],
        1,
    ),
    case(
        "1 container terminated with exitCode 1, expected exitCode 2, 0 eviction",
        {"exitCodes": [2]},
        [pod("p1", main=terminated(exitCode=1))],
        0,
    ),
    case(
        "2 containers terminated with exitCode 1 and 2 respectively, 2 evictions",
        {"exitCodes": [1, 2, 3]},
        [pod("p1", main=terminated(exitCode=1)), pod("p2", main=terminated(exitCode=2))],
        2,
    ),
    case(
        "2 containers terminated with exitCode 1 and 2 respectively, expected exitCode 1, 1 eviction",
        {"exitCodes": [1]},
        [pod("p1", main=terminated(exitCode=1)), pod("p2", main=terminated(exitCode=2))],
        1,
    ),
    case(
        "1 init container terminated with reason NodeAffinity, 1 eviction",
        {"includingInitContainers": True},
        [pod("p1", init=NODE_AFFINITY)],
        1,
    ),
    case(
        "1 init container terminated with exitCode 1, 1 eviction",
        {"includingInitContainers": True, "exitCodes": [1]},
        [pod("p1", main=terminated(exitCode=1))],
        1,
    ),
    case(
        "1 init container terminated with exitCode 2, expected 1, 0 eviction",
        {"includingInitContainers": True, "exitCodes": [1]},
        [pod("p1", main=terminated(exitCode=2))],
        0,
    ),
    case(
        "1 init container waiting with reason CreateContainerConfigError, 1 eviction",
        {"includingInitContainers": True},
        [pod("p1", init=waiting("CreateContainerConfigError"))],
        1,
    ),
    case(
        "2 init container waiting with reason CreateContainerConfigError, 2 nodes, 2 evictions",
        {"includingInitContainers": True},
        [pod("p1", init=CONFIG_ERROR), pod("p2", "node2", init=CONFIG_ERROR)],
        2,
        nodes=[ref.node("node1", 2000, 3000, 10), ref.node("node2", 2000, 3000, 10)],
    ),
    case(
        "include reason=CreateContainerConfigError, 1 container terminated with reason "
        "CreateContainerConfigError, 1 eviction",
        {"reasons": ["CreateContainerConfigError"]},
        [pod("p1", main=CONFIG_ERROR)],
        1,
    ),
    case(
        "include reason=CreateContainerConfigError+NodeAffinity, 1 container terminated with reason "
        "CreateContainerConfigError, 1 eviction",
        {"reasons": ["CreateContainerConfigError", "NodeAffinity"]},
        [pod("p1", main=CONFIG_ERROR)],
        1,
    ),
    case(
        "include reason=CreateContainerConfigError, 1 container terminated with reason NodeAffinity, 0 eviction",
        {"reasons": ["CreateContainerConfigError"]},
        [pod("p1", main=NODE_AFFINITY)],
        0,
    ),
    case(
        "include init container=false, 1 init container waiting with reason CreateContainerConfigError, "
        "0 eviction",
        {"reasons": ["CreateContainerConfigError"]},
        [pod("p1", init=waiting("CreateContainerConfigError"))],
        0,
    ),
    case(
        "lifetime 1 hour, 1 container terminated with reason NodeAffinity, 0 eviction",
        {"minPodLifetimeSeconds": 3600},
        [pod("p1", main=NODE_AFFINITY)],
        0,
    ),
    case(
        "nodeFit=true, 1 unschedulable node, 1 container terminated with reason NodeAffinity, 0 eviction",
        {},
        [pod("p1", main=NODE_AFFINITY)],
        0,
        nodes=[
            ref.node("node1", 2000, 3000, 10),
            ref.node("node2", 2000, 2000, 10, ref.unschedulable),
        ],
        node_fit=True,
    ),
    case(
        "nodeFit=true, only available node does not have enough resources, 1 container terminated with reason "
        "CreateContainerConfigError, 0 eviction",
        {"reasons": ["CreateContainerConfigError"]},
        [pod("p1", main=CONFIG_ERROR)],
        0,
        nodes=[ref.node("node1", 1, 1, 10), ref.node("node2", 0, 0, 10)],
        node_fit=True,
    ),
    case(
        "excluded owner kind=ReplicaSet, 1 init container terminated with owner kind=ReplicaSet, 0 eviction",
        {"includingInitContainers": True, "excludeOwnerKinds": ["ReplicaSet"]},
        [pod("p1", init=NODE_AFFINITY)],
        0,
    ),
    case(
        "excluded owner kind=DaemonSet, 1 init container terminated with owner kind=ReplicaSet, 1 eviction",
        {"includingInitContainers": True, "excludeOwnerKinds": ["DaemonSet"]},
        [pod("p1", init=NODE_AFFINITY)],
        1,
    ),
    case(
        "excluded owner kind=DaemonSet, 1 init container terminated with owner kind=ReplicaSet, 1 pod in "
        "termination; nothing should be moved",
        {"includingInitContainers": True, "excludeOwnerKinds": ["DaemonSet"]},
        [pod("p1", init=NODE_AFFINITY, deleting=True)],
        0,
    ),
    case(
        "1 container terminated with reason ShutDown, 0 evictions",
        {},
        [pod("p1", reason="Shutdown", phase="Failed")],
        0,
        node_fit=True,
    ),
    case(
        "include reason=Shutdown, 2 containers terminated with reason ShutDown, 2 evictions",
        {"reasons": ["Shutdown"]},
        [
            pod("p1", reason="Shutdown", phase="Failed"),
            pod("p2", reason="Shutdown", phase="Failed"),
        ],
        2,
    ),
]


@pytest.mark.parametrize(("args", "nodes", "pods", "node_fit", "expect"), CASES)
def test_case(
    args: Mapping[str, Any],
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    node_fit: bool,
    expect: ref.Expect,
) -> None:
    """The row's number of evictions."""
    # The table builds its args without upstream's defaulting, so an unset
    # minPodLifetimeSeconds means no minimum there (defaulting would make it 3600).
    args = {"minPodLifetimeSeconds": 0, **args}
    settings = {"nodeFit": node_fit}
    evicted = ref.evictions(
        "deschedule", "RemoveFailedPods", args, nodes, pods, settings, spare=True
    )
    ref.check(evicted, expect)


ALL = (CASES,)
