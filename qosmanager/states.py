"""What the QoS plugins see of the node: the `States` and `Health` Protocols and pod views.

The agent's states informer (own Node, own Pods, NodeSLO) implements `States`;
its HTTP server's /healthz implements `Health`. Both are Protocols so that the
qosmanager never imports the agent, and so tests hand in small fakes.

`PodMeta` is a pod as the plugins need it: the `kube.objects.Pod` view plus the
pod's cgroup directory and its containers' directories, which depend on the
node's cgroup driver and on the container IDs kubelet reports in the pod status
(`PodMeta.from_api` computes both).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Protocol, runtime_checkable

import cgroups
from kube import classify, nodeslo, objects, quantity

# Koordinator's allocation result on a pod (`apis/extension/resource.go`):
# {"cpuset": "0-3", ...}; LSE/LSR pods pinned by koord-scheduler carry it.
ANNOTATION_RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"


class States(Protocol):
    """The node's state as the agent's informer keeps it."""

    def node(self) -> objects.Node | None:
        """The agent's own Node, or None before the first sync."""
        ...

    def pods(self) -> Sequence[PodMeta]:
        """The pods bound to this node."""
        ...

    def node_slo(self) -> nodeslo.NodeSLOSpec:
        """The node's NodeSLO spec merged over Koordinator's defaults."""
        ...

    def wait_synced(self, timeout: float) -> bool:
        """Block up to `timeout` seconds for the first full sync; True once synced."""
        ...


@runtime_checkable
class PodEvents(Protocol):
    """A `States` that also says when its pods change (the agent's does; fakes may not).

    Plugins that must act on a new container at once (BatchResource) wait on it
    instead of polling; others ignore it.
    """

    @property
    def pods_version(self) -> int:
        """A number that changes whenever a pod is added, changed or removed."""
        ...

    def wait_pods_changed(self, since: int, timeout: float) -> int:
        """Block up to `timeout` s until `pods_version` differs from `since`; return it."""
        ...


class Health(Protocol):
    """Readiness reporting, one line per component on the agent's /healthz."""

    def set(self, component: str, ready: bool, detail: str) -> None:
        """Record whether `component` is ready and why (shown on /healthz)."""
        ...


@dataclass(frozen=True, slots=True)
class ContainerMeta:
    """A container of a pod: its spec resources and, once running, its id and cgroup."""

    name: str
    requests: quantity.Resources
    limits: quantity.Resources
    id: str | None = None  # bare id, without the "containerd://" scheme
    cgroup_dir: PurePosixPath | None = None
    running: bool = False


@dataclass(frozen=True, slots=True)
class PodMeta:
    """A pod on this node with its cgroup directories."""

    pod: objects.Pod
    cgroup_dir: PurePosixPath
    containers: tuple[ContainerMeta, ...] = ()

    @classmethod
    def from_api(
        cls,
        obj: Mapping[str, Any],
        driver: cgroups.Driver,
        kubelet_root: PurePosixPath = cgroups.DEFAULT_KUBELET_ROOT,
    ) -> PodMeta:
        """Build from a v1.Pod dict; directories follow the kubelet layout for `driver`,
        below the kubelet's cgroupRoot `kubelet_root`."""
        pod = objects.Pod.from_api(obj)
        level = cgroups.QoSLevel.from_qos_class(pod.kube_qos.value)
        uid = cgroups.PodUID(pod.uid)
        statuses = {
            s.get("name", ""): s for s in (obj.get("status") or {}).get("containerStatuses") or ()
        }
        containers = []
        for spec in pod.containers:
            status = statuses.get(spec.name) or {}
            raw_id = status.get("containerID") or ""
            cid, cdir = None, None
            try:
                ref = cgroups.parse_container_id(raw_id) if raw_id else None
            except ValueError:
                ref = None  # an unknown runtime: the container's cgroup cannot be named
            if ref is not None:
                cid, cdir = (
                    str(ref.id),
                    kubelet_root / cgroups.container_dir(driver, level, uid, ref),
                )
            containers.append(
                ContainerMeta(
                    name=spec.name,
                    requests=spec.requests,
                    limits=spec.limits,
                    id=cid,
                    cgroup_dir=cdir,
                    running="running" in (status.get("state") or {}),
                )
            )
        return cls(pod, kubelet_root / cgroups.pod_dir(driver, level, uid), tuple(containers))

    @property
    def uid(self) -> str:
        return str(self.pod.uid)

    @property
    def name(self) -> str:
        return self.pod.name

    @property
    def namespace(self) -> str:
        return self.pod.namespace

    @property
    def key(self) -> str:
        """ "namespace/name"."""
        return self.pod.key

    @property
    def qos(self) -> classify.KoordQOS:
        """Koordinator QoS class (label, else mapped from the Kubernetes class)."""
        return self.pod.koord_qos

    @property
    def kube_qos(self) -> classify.KubeQOS:
        return self.pod.kube_qos

    @property
    def priority(self) -> int:
        """`spec.priority`; a pod without one has Kubernetes' default, 0."""
        return self.pod.priority if self.pod.priority is not None else 0

    @property
    def requests(self) -> quantity.Resources:
        """The scheduler's effective request (CPU in millicores, memory in bytes)."""
        return self.pod.requests

    def limit(self, resource: str) -> int | None:
        """Sum of the containers' limits of `resource`; None if any container is unlimited."""
        total = 0
        for container in self.pod.containers:
            amount = container.limits.get(resource, 0)
            if amount <= 0:
                return None
            total += amount
        return total if self.pod.containers else None

    @property
    def is_active(self) -> bool:
        """Pending or Running and not being deleted (Koordinator's `IsPodInactive` negated)."""
        return self.pod.phase in ("Pending", "Running") and not self.pod.is_terminating

    def pinned_cpus(self) -> frozenset[int]:
        """CPUs koord-scheduler pinned the pod to (resource-status annotation), else none."""
        raw = self.pod.annotations.get(ANNOTATION_RESOURCE_STATUS)
        if not raw:
            return frozenset()
        try:
            text = json.loads(raw).get("cpuset", "")
            return cgroups.parse_cpuset(str(text)) if text else frozenset()
        except (ValueError, AttributeError, cgroups.CgroupError):
            return frozenset()  # a garbled annotation pins nothing
