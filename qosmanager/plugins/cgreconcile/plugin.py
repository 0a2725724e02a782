"""CgroupReconcile: memory QoS (`memory.min`, `memory.low`, `memory.high`) per QoS class.

Gate `CgroupReconcile` (off by default) and, per class, NodeSLO
`resourceQOSStrategy.<lsrClass|lsClass|beClass|systemClass>.memoryQOS.enable`
(LSE pods use the LSR class, as in Koordinator). For a pod of an enabled class:

    memory.min  = memory request * minLimitPercent / 100
    memory.low  = memory request * lowLimitPercent / 100
    memory.high = memory limit * throttlingPercent / 100  (max when 0 or no limit)

rounded down to whole pages. Cgroup v2 protection is hierarchical (a child is
protected only up to what its parents are), so the kubepods root and the QoS
directories get the sum of their pods' min/low, in a leveled write. Only v2
has these files: on v1 the strategy logs once and does nothing. Pods whose
class is disabled again are reset (0, 0, max) once.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from pathlib import PurePosixPath

import cgroups
from kube import classify, nodeslo
from qosmanager import executor as qexecutor
from qosmanager import features
from qosmanager import states as qstates
from qosmanager.plugins import base

log = logging.getLogger(__name__)

NAME = features.CGROUP_RECONCILE
PAGE = 4096


@dataclass(frozen=True, slots=True)
class MemoryQoS:
    """The values one pod gets; None for memory.high means "max"."""

    min: int
    low: int
    high: int | None


RESET = MemoryQoS(0, 0, None)


def _page(n: int) -> int:
    return n // PAGE * PAGE


def pod_memory_qos(pod: qstates.PodMeta, cfg: nodeslo.MemoryQOSCfg) -> MemoryQoS:
    """The memory QoS values of `pod` under its class's config."""
    request = pod.requests.memory
    limit = pod.limit("memory")
    throttling = cfg.throttling_percent or 0
    high = None if not throttling or limit is None else _page(limit * throttling // 100)
    return MemoryQoS(
        min=_page(request * (cfg.min_limit_percent or 0) // 100),
        low=_page(request * (cfg.low_limit_percent or 0) // 100),
        high=high,
    )


def class_config(
    strategy: nodeslo.ResourceQOSStrategy | None, qos: classify.KoordQOS
) -> nodeslo.MemoryQOSCfg | None:
    """The enabled memoryQOS of the pod's class, or None when disabled."""
    s = strategy or nodeslo.ResourceQOSStrategy()
    by_class = {
        classify.KoordQOS.LSE: s.lsr_class,
        classify.KoordQOS.LSR: s.lsr_class,
        classify.KoordQOS.BE: s.be_class,
        classify.KoordQOS.SYSTEM: s.system_class,
    }
    resource_qos = by_class.get(qos, s.ls_class)
    cfg = resource_qos.memory_qos if resource_qos else None
    return cfg if cfg is not None and cfg.enable else None


class CgroupReconcile(base.PeriodicStrategy):
    """The CgroupReconcile strategy (memory QoS part)."""

    name = NAME
    interval_flag = "--cgroup-reconcile-interval-seconds"

    def __init__(self, handle: base.Handle | None = None, *, interval: float = 1.0) -> None:
        super().__init__(handle, interval=interval)
        self._applied: set[PurePosixPath] = set()
        self._unsupported_logged = False

    def tick(self) -> None:
        if self.handle.fs.version is not cgroups.CgroupVersion.V2:
            if not self._unsupported_logged:
                log.info("%s: memory.min/low/high need cgroup v2; nothing to do", NAME)
                self._unsupported_logged = True
            return
        strategy = self.states.node_slo().resource_qos_strategy
        wanted: dict[PurePosixPath, MemoryQoS] = {}
        for pod in self.states.pods():
            cfg = class_config(strategy, pod.qos)
            if cfg is not None and pod.is_active:
                wanted[pod.cgroup_dir] = pod_memory_qos(pod, cfg)
        if not wanted and not self._applied:
            return
        for gone in self._applied - set(wanted):
            wanted[gone] = RESET
        try:
            self._write_protection(
                cgroups.Resource.MEMORY_MIN, {d: q.min for d, q in wanted.items()}
            )
            self._write_protection(
                cgroups.Resource.MEMORY_LOW, {d: q.low for d, q in wanted.items()}
            )
            for rel_dir, values in wanted.items():
                self._update(rel_dir, cgroups.Resource.MEMORY_HIGH, values.high)
        except cgroups.Unsupported as err:
            log.info("%s: %s; memory QoS skipped", NAME, err)
            return
        self._applied = {d for d, q in wanted.items() if q != RESET}

    def _update(
        self, rel_dir: PurePosixPath, resource: cgroups.Resource, value: int | None
    ) -> None:
        try:
            self.handle.executor.update(NAME, rel_dir, resource, value)
        except cgroups.CgroupGone:
            self._applied.discard(rel_dir)

    def _write_protection(self, resource: cgroups.Resource, pods: dict[PurePosixPath, int]) -> None:
        """Pods' values, their QoS dirs' and the kubepods root's sums, top-down."""
        root = self.handle.fs.kubepods_root()
        parents: dict[PurePosixPath, int] = defaultdict(int)
        for rel_dir, value in pods.items():
            parents[rel_dir.parent] += value
        total = sum(pods.values())
        levels: list[qexecutor.Level] = [
            [(root, total)],
            [(d, v) for d, v in sorted(parents.items()) if d != root],
            sorted(pods.items()),
        ]
        self.handle.executor.update_leveled(NAME, resource, [lv for lv in levels if lv])
