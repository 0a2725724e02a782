"""DefaultEvictor, rule by rule: which pods it lets other plugins evict, and why not."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from descheduler import framework
from descheduler.framework import Handle, Reason, Refusal, Snapshot
from descheduler.plugins import defaultevictor
from kube import objects
from tests import builders
from tests.descheduler import fakes

NOW = fakes.NOW
MIRROR = {"kubernetes.io/config.mirror": "abc"}
STATIC = {"kubernetes.io/config.source": "file"}
EVICT = {"descheduler.alpha.kubernetes.io/evict": "true"}
PREFER_NOT = {"descheduler.alpha.kubernetes.io/prefer-no-eviction": ""}


def plugin(
    args: dict[str, Any] | None = None,
    *,
    pods: tuple[objects.Pod, ...] = (),
    nodes: tuple[objects.Node, ...] | None = None,
    **state: Any,
) -> defaultevictor.DefaultEvictor:
    """A DefaultEvictor whose Handle's snapshot holds `pods`, `nodes` and `state`."""
    source = framework.StaticSource(
        nodes=fakes.nodes("n1", "n2") if nodes is None else nodes, pods=pods, **state
    )
    snapshot = Snapshot(source.state(), taken_at=NOW)
    handle = Handle(
        evictor=None,  # type: ignore[arg-type]  # DefaultEvictor never calls it
        decisions=None,  # type: ignore[arg-type]
        clock=fakes.FixedClock(),
        snapshot=lambda: snapshot,
    )
    return defaultevictor.factory(defaultevictor.Args.from_mapping(args or {}), handle)


def refused(refusal: Refusal | None) -> str | None:
    """The refusal's detail, or None when the pod passes."""
    if refusal is None:
        return None
    assert refusal.by == "DefaultEvictor"
    return refusal.detail


pod = builders.make_pod


@pytest.mark.parametrize(
    ("candidate", "args", "expected"),
    [
        pytest.param(pod("p"), {}, None, id="ordinary-replicaset-pod"),
        pytest.param(pod("p", owner="DaemonSet"), {}, "DaemonSet pod", id="daemonset"),
        pytest.param(
            pod("p", owner="DaemonSet", owner_controller=False),
            {},
            "DaemonSet pod",
            id="daemonset-owner-without-controller-flag",
        ),
        pytest.param(
            pod("p", owner="DaemonSet"),
            {"evictDaemonSetPods": True},
            None,
            id="daemonset-explicitly-allowed",
        ),
        pytest.param(pod("p", annotations=MIRROR), {}, "mirror pod", id="mirror"),
        pytest.param(pod("p", annotations=STATIC), {}, "static pod", id="static"),
        pytest.param(pod("p", deleting=NOW), {}, "pod is terminating", id="terminating"),
        pytest.param(
            pod("p", priority=2_000_000_000),
            {},
            "system-critical pod (priority 2000000000, priorityClassName -)",
            id="system-critical-denied",
        ),
        pytest.param(
            pod("p", priority=None, priority_class_name="system-node-critical"),
            {},
            "system-critical pod (priority None, priorityClassName system-node-critical)",
            id="system-critical-by-class-name",
        ),
        pytest.param(
            pod("p", priority=2_000_000_000),
            {"evictSystemCriticalPods": True},
            None,
            id="system-critical-allowed",
        ),
        pytest.param(
            pod("p", local_storage=True),
            {},
            "pod has local storage (emptyDir or hostPath)",
            id="local-storage-denied",
        ),
        pytest.param(
            pod("p", local_storage=True),
            {"evictLocalStoragePods": True},
            None,
            id="local-storage-allowed",
        ),
        pytest.param(pod("p", pvc=True), {}, None, id="pvc-allowed-by-default"),
        pytest.param(
            pod("p", pvc=True),
            {"ignorePvcPods": True},
            "pod has a PersistentVolumeClaim",
            id="pvc-ignored",
        ),
        pytest.param(
            pod("p", pvc=True),
            {"podProtections": {"extraEnabled": ["PodsWithPVC"]}},
            "pod has a PersistentVolumeClaim",
            id="pvc-protected",
        ),
        pytest.param(pod("p", owner=None), {}, "bare pod (no owner)", id="bare-pod"),
        pytest.param(
            pod("p", owner=None, phase="Failed"),
            {},
            "bare pod (no owner)",
            id="failed-bare-pod-protected",
        ),
        pytest.param(
            pod("p", owner=None, phase="Failed"),
            {"evictFailedBarePods": True},
            None,
            id="failed-bare-pod-allowed",
        ),
        pytest.param(
            pod("p", owner=None),
            {"evictFailedBarePods": True},
            "bare pod (no owner) not in Failed phase",
            id="running-bare-pod-with-evictFailedBarePods",
        ),
        pytest.param(
            pod("p", owner=None, phase="Failed"),
            {"podProtections": {"defaultDisabled": ["FailedBarePods"]}},
            None,
            id="failed-bare-pod-protection-disabled",
        ),
        pytest.param(
            pod("p", priority=1000),
            {"priorityThreshold": {"value": 1000}},
            "priority 1000 is not below the threshold 1000",
            id="priority-threshold-value-denied",
        ),
        pytest.param(
            pod("p", priority=999), {"priorityThreshold": {"value": 1000}}, None, id="below-value"
        ),
        pytest.param(
            pod("p", priority=None),
            {"priorityThreshold": {"value": 1000}},
            None,
            id="no-priority-is-below",
        ),
        pytest.param(
            pod("p", priority=600),
            {"priorityThreshold": {"name": "high"}},
            "priority 600 is not below the threshold 500",
            id="priority-threshold-name-denied",
        ),
        pytest.param(
            pod("p", priority=400), {"priorityThreshold": {"name": "high"}}, None, id="below-name"
        ),
        pytest.param(
            pod("p", priority=0),
            {"priorityThreshold": {"name": "missing"}},
            "priorityThreshold PriorityClass missing does not exist",
            id="priority-threshold-unknown-name",
        ),
        pytest.param(
            pod("p", priority=2_000_000_000),
            {"priorityThreshold": {"name": "system-cluster-critical"}},
            "system-critical pod (priority 2000000000, priorityClassName -)",
            id="priority-threshold-builtin-name",
        ),
        pytest.param(
            pod("p", labels={"app": "db"}),
            {"labelSelector": {"matchLabels": {"app": "web"}}},
            "labels do not match labelSelector app=web",
            id="label-selector-denied",
        ),
        pytest.param(
            pod("p", labels={"app": "web"}),
            {"labelSelector": {"matchLabels": {"app": "web"}}},
            None,
            id="label-selector-allowed",
        ),
        pytest.param(
            pod("p", started=NOW - timedelta(hours=1)),
            {"minPodAge": "2h"},
            "pod age 1:00:00 is below minPodAge 2:00:00",
            id="min-pod-age-too-young",
        ),
        pytest.param(
            pod("p", started=NOW - timedelta(hours=3)), {"minPodAge": "2h"}, None, id="old-enough"
        ),
        pytest.param(
            pod("p", started=None, node=None),
            {"minPodAge": "2h"},
            "pod has not started; minPodAge is 2:00:00",
            id="min-pod-age-not-started",
        ),
        pytest.param(
            pod("p", annotations=PREFER_NOT),
            {"noEvictionPolicy": "Mandatory"},
            "prefer-no-eviction annotation with noEvictionPolicy Mandatory",
            id="prefer-no-eviction-mandatory",
        ),
        pytest.param(pod("p", annotations=PREFER_NOT), {}, None, id="prefer-no-eviction-preferred"),
        pytest.param(
            pod("p"),
            {"ignorePodsWithoutPDB": True},
            "no PodDisruptionBudget covers the pod",
            id="pods-without-pdb",
        ),
        pytest.param(
            pod("p", owner=None, local_storage=True),
            {},
            "bare pod (no owner); pod has local storage (emptyDir or hostPath)",
            id="every-failed-check-is-listed",
        ),
    ],
)
def test_filter(candidate: objects.Pod, args: dict[str, Any], expected: str | None) -> None:
    """Each protection refuses exactly the pods it names, and says so."""
    evictor = plugin(args, pods=(candidate,), priority_classes={"high": 500})
    assert refused(evictor.filter(candidate)) == expected


@pytest.mark.parametrize(
    ("candidate", "expected"),
    [
        pytest.param(pod("p", local_storage=True, annotations=EVICT), None, id="local-storage"),
        pytest.param(pod("p", owner=None, annotations=EVICT), None, id="bare-pod"),
        pytest.param(pod("p", priority=2_000_000_000, annotations=EVICT), None, id="critical"),
        pytest.param(
            pod("p", annotations={**EVICT, **PREFER_NOT}), None, id="beats-prefer-no-eviction"
        ),
        pytest.param(
            pod("p", owner="DaemonSet", annotations=EVICT), "DaemonSet pod", id="not-daemonset"
        ),
        pytest.param(pod("p", annotations={**EVICT, **MIRROR}), "mirror pod", id="not-mirror"),
        pytest.param(
            pod("p", deleting=NOW, annotations=EVICT), "pod is terminating", id="not-terminating"
        ),
    ],
)
def test_evict_annotation_lifts_only_the_optional_protections(
    candidate: objects.Pod, expected: str | None
) -> None:
    """`descheduler.alpha.kubernetes.io/evict` overrides optional filters, never the hard ones."""
    evictor = plugin({"noEvictionPolicy": "Mandatory", "minPodAge": "48h"}, pods=(candidate,))
    assert refused(evictor.filter(candidate)) == expected


def test_min_replicas_counts_the_owners_pods() -> None:
    """minReplicas 2: a lone replica is kept, one of two may go."""
    lone = pod("lone", owner_name="rs-a")
    pair = [pod("x", owner_name="rs-b"), pod("y", owner_name="rs-b")]
    evictor = plugin({"minReplicas": 2}, pods=(lone, *pair))
    assert refused(evictor.filter(lone)) == "owner has 1 replicas, fewer than minReplicas 2"
    assert evictor.filter(pair[0]) is None


def test_min_replicas_counts_owners_without_controller_flag() -> None:
    """minReplicas groups by the first owner when no reference is the controller."""
    pair = [pod(n, owner_name="rs-c", owner_controller=False) for n in ("x", "y")]
    evictor = plugin({"minReplicas": 2}, pods=tuple(pair))
    assert evictor.filter(pair[0]) is None
    assert refused(plugin({"minReplicas": 3}, pods=tuple(pair)).filter(pair[0])) == (
        "owner has 2 replicas, fewer than minReplicas 3"
    )


def test_pdb_coverage_lets_covered_pods_through() -> None:
    """ignorePodsWithoutPDB: a pod a budget selects passes."""
    covered = pod("web", labels={"app": "web"})
    budget = framework.DisruptionBudget.from_api(
        {
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
        }
    )
    evictor = plugin({"ignorePodsWithoutPDB": True}, pods=(covered,), pdbs=[budget])
    assert evictor.filter(covered) is None


TAINTED = builders.make_node("n2", taints=["dedicated=db:NoSchedule"])


@pytest.mark.parametrize(
    ("args", "node_list", "others", "expected"),
    [
        pytest.param({}, fakes.nodes("n1", "n2"), (), None, id="fits-elsewhere"),
        pytest.param(
            {},
            [builders.make_node("n1"), TAINTED],
            (),
            "fits no other ready node (n2: untolerated taint dedicated=db:NoSchedule)",
            id="nodefit-default-on-taint",
        ),
        pytest.param(
            {"nodeFit": False}, [builders.make_node("n1"), TAINTED], (), None, id="nodefit-off"
        ),
        pytest.param(
            {},
            fakes.nodes("n1", "n2"),
            (pod("big", node="n2", cpu="3950m"),),
            "fits no other ready node (n2: insufficient cpu)",
            id="destination-full",
        ),
        pytest.param(
            {},
            [builders.make_node("n1"), builders.make_node("n2", ready=False)],
            (),
            "no other ready node",
            id="no-other-ready-node",
        ),
        pytest.param(
            {"nodeSelector": "pool=a"},
            fakes.nodes("n1", "n2"),
            (),
            "no other ready node",
            id="evictor-node-selector",
        ),
    ],
)
def test_node_fit(
    args: dict[str, Any],
    node_list: list[objects.Node],
    others: tuple[objects.Pod, ...],
    expected: str | None,
) -> None:
    """nodeFit (on by default): the pod must fit some other Ready node, taints and capacity included."""
    candidate = pod("p", node="n1", cpu="100m")
    evictor = plugin(args, pods=(candidate, *others), nodes=tuple(node_list))
    refusal = evictor.pre_eviction_filter(candidate)
    if expected is None:
        assert refusal is None
    else:
        assert refusal is not None
        assert (refusal.reason, refusal.detail) == (Reason.NO_FIT, expected)


def test_namespace_label_selector() -> None:
    """namespaceLabelSelector: pods of namespaces whose labels do not match stay."""
    inside, outside = pod("a", namespace="team-a"), pod("b", namespace="team-b")
    evictor = plugin(
        {"namespaceLabelSelector": {"matchLabels": {"evictable": "yes"}}},
        pods=(inside, outside),
        namespaces={"team-a": {"evictable": "yes"}, "team-b": {}},
    )
    assert evictor.pre_eviction_filter(inside) is None
    assert refused(evictor.pre_eviction_filter(outside)) == (
        "namespace team-b does not match namespaceLabelSelector evictable=yes"
    )


def test_node_fit_default_is_on() -> None:
    """Safe default: DefaultEvictor's nodeFit is true unless the user turns it off."""
    assert defaultevictor.Args().node_fit is True


def test_pods_with_resource_claims_protection() -> None:
    """upstream v0.34 PodsWithResourceClaims: a pod with spec.resourceClaims is kept when enabled."""
    raw = builders.make_pod_dict("gpu")
    raw["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
    claimed, plain = objects.Pod.from_api(raw), builders.make_pod("plain")
    on = plugin({"podProtections": {"extraEnabled": ["PodsWithResourceClaims"]}})
    assert refused(on.filter(claimed)) == "pod has ResourceClaims"
    assert refused(on.filter(plain)) is None
    assert refused(plugin().filter(claimed)) is None  # not a default protection
