"""Which pods and containers the collectors read, with their file paths resolved once.

A `PodSource` hands the pod collector a list of `PodTarget`s every round. The
standalone agent's source, `StandaloneDiscovery`, walks the kubepods hierarchy
(`cgroups.scan_pods`, pod UID from the directory name) every `rescan_every`
rounds and in between reuses what it found: a round then costs only the reads,
not a directory walk. A pod whose cgroup vanished is dropped at once
(`forget`); a container that vanished (restarted) makes the next round rescan.
The in-cluster source (pods from the API server) comes with the states
informer and implements the same Protocol.
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


# Kubelet QoS level -> what Koordinator defaults a pod without labels to
# (apis/extension: GetPodQoSClassWithDefault, GetPodPriorityClassWithQoS).
_STANDALONE_QOS = {
    cgroups.QoSLevel.GUARANTEED: (classify.KoordQOS.LSR, classify.PriorityClass.PROD),
    cgroups.QoSLevel.BURSTABLE: (classify.KoordQOS.LS, classify.PriorityClass.PROD),
    cgroups.QoSLevel.BESTEFFORT: (classify.KoordQOS.BE, classify.PriorityClass.BATCH),
}
# A standalone agent knows no pod names: a pod is reported under its UID in this
# namespace. It is not empty because the NodeMetric CRD requires a namespace, and
# the UID alone identifies the pod.
STANDALONE_NAMESPACE = "unknown"


def standalone_meta(uid: cgroups.PodUID, qos: cgroups.QoSLevel) -> nodemetric.PodMeta:
    """What NodeMetric says about a pod known only from its cgroup."""
    koord_qos, priority = _STANDALONE_QOS[qos]
    return nodemetric.PodMeta(
        uid=uid, name=uid, namespace=STANDALONE_NAMESPACE, priority=priority, qos=koord_qos
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
