"""A pod's workload: which replicas it expects and which pods it has (Koordinator's controllerfinder).

`resolve(pod, pods, owners)` follows the pod's controller reference:

- ReplicaSet: its `spec.replicas`, unless a Deployment controls it; then the
  Deployment's `spec.replicas`, and the pods of all of that Deployment's
  ReplicaSets (a rolling update is one workload, not two);
- StatefulSet, ReplicationController, Deployment: their `spec.replicas`;
- any other kind (Job, CloneSet, ...): the pods it has now are what it expects
  (nodeqos does not read every scale subresource in the cluster);
- no controller: no workload, so no per-workload limit applies (Koordinator).

Offline (`simulate`, no API client) there are no owner objects: every workload
expects the pods it has. An owner that the caches do not hold (yet) is
`Unresolved`: the filter refuses the pod for now and arbitration waits, rather
than failing a job on cache lag.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from descheduler.plugins.migrationcontroller.limits import Workload
from kube import cache, objects

REPLICA_SET = "ReplicaSet"
DEPLOYMENT = "Deployment"
STATEFUL_SET = "StatefulSet"
REPLICATION_CONTROLLER = "ReplicationController"

# The kinds whose objects are cached, and where they live in the API.
RESOURCES: Mapping[str, cache.Resource] = {
    REPLICA_SET: cache.Resource("apps", "v1", "replicasets", True),
    DEPLOYMENT: cache.Resource("apps", "v1", "deployments", True),
    STATEFUL_SET: cache.Resource("apps", "v1", "statefulsets", True),
    REPLICATION_CONTROLLER: cache.Resource("", "v1", "replicationcontrollers", True),
}


@dataclass(frozen=True, slots=True)
class Owner:
    """The slim view of a workload object the caches keep."""

    kind: str
    namespace: str
    name: str
    uid: str
    replicas: int
    controller: objects.OwnerReference | None = None  # a ReplicaSet's Deployment

    @classmethod
    def projector(cls, kind: str) -> Any:
        def project(obj: Mapping[str, Any]) -> Owner:
            meta = obj.get("metadata") or {}
            refs = meta.get("ownerReferences") or ()
            controller = next((r for r in refs if r.get("controller")), None)
            replicas = (obj.get("spec") or {}).get("replicas")
            return cls(
                kind=kind,
                namespace=str(meta.get("namespace", "")),
                name=str(meta.get("name", "")),
                uid=str(meta.get("uid", "")),
                # apps/v1 and v1 default spec.replicas to 1
                replicas=1 if replicas is None else int(replicas),
                controller=None
                if controller is None
                else objects.OwnerReference(
                    str(controller.get("kind", "")),
                    str(controller.get("name", "")),
                    str(controller.get("uid", "")),
                    True,
                    str(controller.get("apiVersion", "")),
                ),
            )

        return project


class PodSource(Protocol):
    """Pods by key and by controller UID (the plugin's cache, or a snapshot offline)."""

    def pod(self, key: str) -> objects.Pod | None: ...

    def pods_of_owner(self, uid: str) -> Sequence[objects.Pod]: ...


class OwnerSource(Protocol):
    """Workload objects by kind and key, and a Deployment's ReplicaSets."""

    def owner(self, kind: str, namespace: str, name: str) -> Owner | None: ...

    def replica_sets_of(self, deployment_uid: str) -> Sequence[Owner]: ...


@dataclass(frozen=True, slots=True)
class Unresolved:
    """The pod's controller could not be looked up (yet)."""

    reason: str


def resolve(
    pod: objects.Pod, pods: PodSource, owners: OwnerSource | None
) -> Workload | Unresolved | None:
    """The pod's workload; None when it has no controller."""
    ref = pod.controller_ref
    if ref is None:
        return None
    what = f"{ref.kind} {pod.namespace}/{ref.name}"
    if owners is None or ref.kind not in RESOURCES:
        return _observed(ref, what, pods)
    found = owners.owner(ref.kind, pod.namespace, ref.name)
    if found is None or found.uid != ref.uid:
        return Unresolved(f"its controller {what} is not known (yet)")
    if ref.kind == REPLICA_SET and found.controller and found.controller.kind == DEPLOYMENT:
        parent = owners.owner(DEPLOYMENT, pod.namespace, found.controller.name)
        if parent is None or parent.uid != found.controller.uid:
            return Unresolved(
                f"the Deployment {pod.namespace}/{found.controller.name} of {what} "
                "is not known (yet)"
            )
        members = frozenset({found.uid, *(rs.uid for rs in owners.replica_sets_of(parent.uid))})
        return _workload(
            parent.uid, f"Deployment {pod.namespace}/{parent.name}", parent.replicas, members, pods
        )
    return _workload(found.uid, what, found.replicas, frozenset({found.uid}), pods)


def _observed(ref: objects.OwnerReference, what: str, pods: PodSource) -> Workload:
    have = tuple(pods.pods_of_owner(ref.uid))
    return Workload(ref.uid, what, len(have), frozenset({ref.uid}), have)


def _workload(
    key: str, what: str, expected: int, members: frozenset[str], pods: PodSource
) -> Workload:
    have = tuple(p for uid in sorted(members) for p in pods.pods_of_owner(uid))
    return Workload(key, what, expected, members, have)
