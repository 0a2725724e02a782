"""Which pods and containers the collectors read, with their file paths resolved once.

A `PodSource` hands the pod collector a list of `PodTarget`s every round. The
standalone agent's source, `StandaloneDiscovery`, walks the kubepods hierarchy
(`cgroups.scan_pods`, pod UID from the directory name) every `rescan_every`
rounds and in between reuses what it found: a round then costs only the reads,
not a directory walk. A pod whose cgroup vanished is dropped at once
(`forget`); a container that vanished (restarted) makes the next round rescan.

In a cluster, `ClusterDiscovery` takes the pods bound to the node from the
states informer (`agent.states`) instead: the pod cgroup from the UID and the
Kubernetes QoS class, the container cgroups from the container IDs kubelet
reports, names and classes for NodeMetric from the pod itself. It needs no
directory walk at all; it re-resolves when the informer's pods change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Protocol

import cgroups
from agent import nodemetric
from kube import classify
from metriccache import kinds
from qosmanager import states as qstates

V1 = cgroups.CgroupVersion.V1


@dataclass(frozen=True, slots=True)
class CgroupFiles:
    """The interface files the hot path reads, as ready-to-open path strings.

    On v2 `cpu_usage` and `cpu_stat` are the same `cpu.stat` (read once); on
    v1 usage is `cpuacct.usage` and throttling `cpu.stat` of the cpu mount.
    """

    rel_dir: PurePosixPath
    cpu_usage: str
    cpu_stat: str
    memory_stat: str


def cgroup_files(fs: cgroups.CgroupFS, rel_dir: PurePosixPath) -> CgroupFiles:
    """Resolve the hot-path files of one cgroup."""
    cpu_stat = str(fs.path(rel_dir, "cpu.stat"))
    return CgroupFiles(
        rel_dir=rel_dir,
        cpu_usage=str(fs.path(rel_dir, "cpuacct.usage")) if fs.version is V1 else cpu_stat,
        cpu_stat=cpu_stat,
        memory_stat=str(fs.path(rel_dir, "memory.stat")),
    )


@dataclass(frozen=True, slots=True)
class ContainerTarget:
    """One container cgroup to read; `labels` are its metric-cache labels."""

    id: cgroups.ContainerID
    labels: Mapping[str, str]
    files: CgroupFiles


@dataclass(frozen=True, slots=True)
class PodTarget:
    """One pod cgroup and its containers to read."""

    uid: cgroups.PodUID
    qos: cgroups.QoSLevel
    labels: Mapping[str, str]
    files: CgroupFiles
    containers: tuple[ContainerTarget, ...]


def pod_target(fs: cgroups.CgroupFS, pod: cgroups.PodCgroup) -> PodTarget:
    """Resolve every path of a scanned pod once."""
    # Plain dicts, built once and never mutated: the metric cache reads them per sample.
    pod_labels = {kinds.POD_UID: pod.uid}
    containers = tuple(
        ContainerTarget(
            id=c.id,
            labels={kinds.POD_UID: pod.uid, kinds.CONTAINER_ID: c.id},
            files=cgroup_files(fs, c.rel_dir),
        )
        for c in pod.containers
    )
    return PodTarget(
        uid=pod.uid,
        qos=pod.qos,
        labels=pod_labels,
        files=cgroup_files(fs, pod.rel_dir),
        containers=containers,
    )


class PodSource(Protocol):
    """Where the pod collector gets its pods from."""

    def targets(self) -> Sequence[PodTarget]:
        """The pods to read this round (called once per round)."""
        ...

    def forget(self, uid: cgroups.PodUID) -> None:
        """The pod's cgroup is gone: stop reading it."""
        ...

    def rescan_soon(self) -> None:
        """Something below a pod changed (a container went away): look again."""
        ...

    def pod_metas(self) -> dict[str, nodemetric.PodMeta]:
        """NodeMetric metadata of the pods known now, by UID."""
        ...


# Kubelet QoS level -> what Koordinator defaults a pod without labels to
# (apis/extension: GetPodQoSClassWithDefault).
_STANDALONE_QOS = {
    cgroups.QoSLevel.GUARANTEED: classify.KoordQOS.LSR,
    cgroups.QoSLevel.BURSTABLE: classify.KoordQOS.LS,
    cgroups.QoSLevel.BESTEFFORT: classify.KoordQOS.BE,
}


def default_priority(qos: classify.KoordQOS) -> classify.PriorityClass:
    """The priority class Koordinator assumes for a pod that names none.

    apis/extension `GetPodPriorityClassWithQoS`: BE pods are batch; SYSTEM,
    LSE, LSR and LS pods are prod; anything else has none.
    """
    if qos is classify.KoordQOS.BE:
        return classify.PriorityClass.BATCH
    if qos is classify.KoordQOS.NONE:
        return classify.PriorityClass.NONE
    return classify.PriorityClass.PROD


# A standalone agent knows no pod names: a pod is reported under its UID in this
# namespace. It is not empty because the NodeMetric CRD requires a namespace, and
# the UID alone identifies the pod.
STANDALONE_NAMESPACE = "unknown"


def standalone_meta(uid: cgroups.PodUID, qos: cgroups.QoSLevel) -> nodemetric.PodMeta:
    """What NodeMetric says about a pod known only from its cgroup."""
    koord_qos = _STANDALONE_QOS[qos]
    return nodemetric.PodMeta(
        uid=uid,
        name=uid,
        namespace=STANDALONE_NAMESPACE,
        priority=default_priority(koord_qos),
        qos=koord_qos,
    )


def cluster_meta(pod: qstates.PodMeta) -> nodemetric.PodMeta:
    """What NodeMetric says about a pod known from the API server.

    koordlet's `GetPodQoSClassWithDefault` and `GetPodPriorityClassWithDefault`:
    the Koordinator labels, else the Kubernetes QoS class and `spec.priority`
    band, else the QoS class's default priority.
    """
    view = pod.pod
    priority = view.koord_priority_class or default_priority(view.koord_qos)
    return nodemetric.PodMeta(
        uid=view.uid,
        name=view.name,
        namespace=view.namespace,
        priority=priority,
        qos=view.koord_qos,
    )


class StandaloneDiscovery:
    """A `PodSource` that scans the kubepods hierarchy; see the module docstring."""

    __slots__ = ("_calls", "_fs", "_known", "_rescan", "_rescan_every", "_targets")

    def __init__(self, fs: cgroups.CgroupFS, *, rescan_every: int = 10) -> None:
        if rescan_every < 1:
            raise ValueError(f"rescan_every must be >= 1, got {rescan_every}")
        self._fs = fs
        self._rescan_every = rescan_every
        self._calls = 0
        self._rescan = True
        self._known: dict[cgroups.PodCgroup, PodTarget] = {}
        self._targets: list[PodTarget] = []

    def targets(self) -> Sequence[PodTarget]:
        """The known pods; rescans on the first call, every N-th, and when asked."""
        if self._rescan or self._calls % self._rescan_every == 0:
            self._scan()
        self._calls += 1
        return self._targets

    def _scan(self) -> None:
        found: dict[cgroups.PodCgroup, PodTarget] = {}
        for pod in cgroups.scan_pods(self._fs):
            target = self._known.get(pod)
            found[pod] = target if target is not None else pod_target(self._fs, pod)
        self._known = found
        self._targets = list(found.values())
        self._rescan = False

    def forget(self, uid: cgroups.PodUID) -> None:
        """Drop a pod whose cgroup vanished (a later scan finds it if it comes back)."""
        self._targets = [t for t in self._targets if t.uid != uid]
        self._known = {p: t for p, t in self._known.items() if t.uid != uid}

    def rescan_soon(self) -> None:
        """Scan again on the next round."""
        self._rescan = True

    def pod_metas(self) -> dict[str, nodemetric.PodMeta]:
        """NodeMetric metadata of the pods currently known, by UID."""
        return {t.uid: standalone_meta(t.uid, t.qos) for t in self._targets}


class PodLister(Protocol):
    """The pods bound to this node, as the states informer keeps them."""

    def pods(self) -> Sequence[qstates.PodMeta]:
        """Every pod bound to the node."""
        ...

    @property
    def pods_version(self) -> int:
        """A number that changes whenever a pod is added, changed or removed."""
        ...


# Pods in these phases have no cgroups left: their containers ended for good.
_FINISHED = frozenset({"Succeeded", "Failed"})
# What a pod's target is built from: when any of it changes the target is rebuilt.
_TargetKey = tuple[str, PurePosixPath, tuple[tuple[str, PurePosixPath], ...]]


class ClusterDiscovery:
    """A `PodSource` over the states informer's pods; see the module docstring.

    The targets are rebuilt when the informer's pods change, when a container
    went away (`rescan_soon`), and every `retry_every` rounds. A pod whose
    cgroup is missing (`forget`: not created yet, or already removed) is left
    out until the pod changes in the API or the periodic retry, so a pod that
    is still starting costs one failed read per retry, not one per round.
    """

    __slots__ = (
        "_calls",
        "_forgotten",
        "_fs",
        "_known",
        "_lister",
        "_rescan",
        "_retry_every",
        "_targets",
        "_version",
    )

    def __init__(self, fs: cgroups.CgroupFS, lister: PodLister, *, retry_every: int = 10) -> None:
        if retry_every < 1:
            raise ValueError(f"retry_every must be >= 1, got {retry_every}")
        self._fs = fs
        self._lister = lister
        self._retry_every = retry_every
        self._calls = 0
        self._rescan = True
        self._version: int | None = None
        self._known: dict[_TargetKey, PodTarget] = {}
        self._targets: list[PodTarget] = []
        # pod UID -> the pod's resourceVersion when its cgroup was found missing
        self._forgotten: dict[str, str] = {}

    def targets(self) -> Sequence[PodTarget]:
        """The pods to read; rebuilt as the class docstring says."""
        retry = self._calls % self._retry_every == 0
        version = self._lister.pods_version
        if retry:
            self._forgotten.clear()
        if retry or self._rescan or version != self._version:
            self._build(version)
        self._calls += 1
        return self._targets

    def _build(self, version: int) -> None:
        found: dict[_TargetKey, PodTarget] = {}
        for meta in self._lister.pods():
            view = meta.pod
            if view.phase in _FINISHED:
                continue
            if self._forgotten.get(meta.uid) == view.resource_version:
                continue
            containers = tuple(
                (c.id, c.cgroup_dir)
                for c in meta.containers
                if c.running and c.id is not None and c.cgroup_dir is not None
            )
            key = (meta.uid, meta.cgroup_dir, containers)
            target = self._known.get(key)
            if target is None:
                target = pod_target(self._fs, _pod_cgroup(meta, containers))
            found[key] = target
        self._known = found
        self._targets = list(found.values())
        self._version = version
        self._rescan = False

    def forget(self, uid: cgroups.PodUID) -> None:
        """The pod's cgroup is missing: leave it out until it changes or the retry."""
        self._targets = [t for t in self._targets if t.uid != uid]
        self._known = {k: t for k, t in self._known.items() if t.uid != uid}
        for meta in self._lister.pods():
            if meta.uid == uid:
                self._forgotten[uid] = meta.pod.resource_version
                break

    def rescan_soon(self) -> None:
        """Rebuild on the next round (a container's cgroup went away)."""
        self._rescan = True

    def pod_metas(self) -> dict[str, nodemetric.PodMeta]:
        """NodeMetric metadata of every pod bound to the node, by UID."""
        return {meta.uid: cluster_meta(meta) for meta in self._lister.pods()}


def _pod_cgroup(
    meta: qstates.PodMeta, containers: tuple[tuple[str, PurePosixPath], ...]
) -> cgroups.PodCgroup:
    uid = cgroups.PodUID(meta.uid)
    return cgroups.PodCgroup(
        qos=cgroups.QoSLevel.from_qos_class(meta.kube_qos.value),
        uid=uid,
        rel_dir=meta.cgroup_dir,
        containers=tuple(
            cgroups.ContainerCgroup(id=cgroups.ContainerID(cid), runtime=None, rel_dir=rel_dir)
            for cid, rel_dir in containers
        ),
    )
