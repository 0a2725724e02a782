"""The evictor proxy plugins hold as `handle.evictor`: filters AND limits AND a backend.

One `EvictorProxy` per profile ANDs that profile's Filter plugins (`filter`)
and PreEvictionFilter plugins (`pre_eviction_filter`, e.g. nodeFit) under a
framework safety floor (mirror, static, terminating and unscheduled pods are
never evicted, whatever the profile enables). All proxies share one
`EvictionCore`: the cycle (snapshot, limit ledger, decision log), the backend,
the dry-run switch and the metrics.

`evict()` walks one pod through, recording exactly one outcome:

1. already evicted this cycle → `already_evicted`; refused by a PDB this cycle
   → `pdb_blocked` again, without an API call; gone → `pod_gone`; refused by a
   PDB in an earlier cycle and still resting (`backoff.PdbBackoff`) → `backoff`;
2. filters, then pre-eviction filters → their `Refusal`;
3. limits, counted at admission → `limit_reached` naming the limit;
4. dry-run: the predicted answer (`dryrun.predict`), no write at all; else the
   profile's Evict plugin, or the backend directly when none is enabled;
5. accepted → the snapshot projects the eviction, the report lists it;
   refused → the slot is released and the outcome's reason recorded.

With the `EvictionsInBackground` gate (`core.background` set, see
`background.py`): a pod whose background eviction is already in progress is
not asked again and counts as leaving (`eviction_in_background`, True to the
caller, as upstream's nil error); a 429 "Eviction triggered evacuation" from a
`request-evict-only` pod is an accepted eviction in background: its slot moves
from this cycle's counts to the requests in progress, which count against the
limits until the pod is gone.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterable
from datetime import UTC, datetime

from descheduler.evictions import Backend, EvictOptions
from descheduler.framework import background as bg
from descheduler.framework import dryrun
from descheduler.framework.backoff import PdbBackoff
from descheduler.framework.cycle import Cycle, CycleCell, Decisions, mode
from descheduler.framework.interfaces import (
    Clock,
    EvictPlugin,
    FilterPlugin,
    PreEvictionFilterPlugin,
)
from descheduler.framework.limits import Limits
from descheduler.framework.metrics import Metrics
from descheduler.framework.reasons import Reason, Refusal
from descheduler.framework.report import Eviction
from kube import eviction, objects
from kube.quantity import Resources

log = logging.getLogger("descheduler.evictor")


def _utc_now() -> datetime:
    return datetime.now(UTC)


FRAMEWORK = "framework"
UNLIMITED = Limits()

# API outcome -> (reason code for the report, `result` label of pods_evicted_total)
_REFUSED: dict[eviction.Outcome, tuple[Reason, str]] = {
    eviction.Outcome.PDB_BLOCKED: (Reason.PDB_BLOCKED, "pdb_blocked"),
    eviction.Outcome.NOT_FOUND: (Reason.POD_GONE, "pod_gone"),
    eviction.Outcome.UID_MISMATCH: (Reason.POD_GONE, "pod_gone"),
    eviction.Outcome.FORBIDDEN: (Reason.FORBIDDEN, "forbidden"),
    eviction.Outcome.UNAVAILABLE: (Reason.API_UNAVAILABLE, "api_unavailable"),
    eviction.Outcome.FAILED: (Reason.EVICTION_FAILED, "error"),
}


def safety_floor(pod: objects.Pod) -> Refusal | None:
    """Pods no configuration may evict: evicting them frees nothing or is already under way."""
    if pod.is_mirror:
        detail = "mirror pod (the kubelet recreates it)"
    elif pod.is_static:
        detail = "static pod (the kubelet owns it)"
    elif pod.is_terminating:
        detail = "pod is already terminating"
    elif not pod.node_name:
        detail = "pod is not bound to a node"
    else:
        return None
    return Refusal(Reason.FILTERED, detail, FRAMEWORK)


class EvictionCore:
    """What every profile's proxy shares."""

    def __init__(
        self,
        *,
        cell: CycleCell,
        backend: Backend,
        metrics: Metrics,
        limits: Limits = UNLIMITED,
        dry_run: bool = False,
        clock: Clock | None = None,
        backoff: PdbBackoff | None = None,
        background: bg.BackgroundRequests | None = None,
    ) -> None:
        self.cell = cell
        self.backend = backend
        self.metrics = metrics
        self.limits = limits
        self.dry_run = dry_run
        self.clock: Clock = clock if clock is not None else _utc_now
        self.backoff = backoff if backoff is not None else PdbBackoff()
        self.background = background  # None: the EvictionsInBackground gate is off
        self.lock = threading.RLock()


class EvictorProxy:
    """A profile's evictor (`handle.evictor`); filled with plugins at start-up."""

    def __init__(self, core: EvictionCore, decisions: Decisions) -> None:
        self._core = core
        self._decisions = decisions
        self.profile = decisions.profile
        # (configured name, plugin), in configuration order
        self.filters: list[tuple[str, FilterPlugin]] = []
        self.pre_eviction_filters: list[tuple[str, PreEvictionFilterPlugin]] = []
        self.evict_plugin: tuple[str, EvictPlugin] | None = None

    # -- questions ---------------------------------------------------------------

    def filter(self, pod: objects.Pod) -> Refusal | None:
        refusal = safety_floor(pod)
        if refusal is not None:
            return refusal
        for name, plugin in self.filters:
            refusal = _named(plugin.filter(pod), name)
            if refusal is not None:
                return refusal
        return None

    def pre_eviction_filter(self, pod: objects.Pod) -> Refusal | None:
        for name, plugin in self.pre_eviction_filters:
            refusal = _named(plugin.pre_eviction_filter(pod), name)
            if refusal is not None:
                return refusal
        return None

    def evictable(self, pods: Iterable[objects.Pod], *, plugin: str) -> list[objects.Pod]:
        passed = []
        for pod in pods:
            refusal = self.filter(pod)
            if refusal is None:
                passed.append(pod)
            else:
                self._decisions.skip(pod, plugin=plugin, reason=refusal)
        return passed

    def node_limit_reached(self, node: str) -> bool:
        return self._core.cell.current().ledger.node_full(node)

    def namespace_limit_reached(self, namespace: str) -> bool:
        return self._core.cell.current().ledger.namespace_full(namespace)

    def total_limit_reached(self) -> bool:
        return self._core.cell.current().ledger.total_full()

    # -- the eviction --------------------------------------------------------------

    def evict(
        self,
        pod: objects.Pod,
        *,
        plugin: str,
        reason: str,
        destination: str | None = None,
        usage: Resources | None = None,
    ) -> bool:
        with self._core.lock:
            cycle = self._core.cell.current()
            refusal = self._precheck(cycle, pod)
            if refusal is None and self._requested_before(pod):
                self._decisions.skip(
                    pod,
                    plugin=plugin,
                    reason=Reason.IN_BACKGROUND,
                    detail="its eviction was requested earlier and is in progress; not asked again",
                )
                cycle.snapshot.record_eviction(pod, destination, usage)
                return True
            if refusal is None:
                refusal = self.filter(pod) or self.pre_eviction_filter(pod)
            if refusal is None:
                limit = cycle.ledger.admit(pod)
                if limit is not None:
                    refusal = Refusal(Reason.LIMIT_REACHED, limit, FRAMEWORK)
            if refusal is not None:
                self._decisions.skip(pod, plugin=plugin, reason=refusal)
                return False
            options = EvictOptions(
                plugin=plugin, reason=reason, profile=self.profile, destination=destination or ""
            )
            try:
                result = self._carry_out(cycle, pod, options)
            except BaseException:
                cycle.ledger.release(pod)  # a raising Evict plugin; the runner reports it
                raise
            if result.ok:
                self._accepted(cycle, pod, options, destination, usage)
                return True
            cycle.ledger.release(pod)
            if self._core.background is not None and bg.triggered(pod, result):
                if not bg.completed(pod):  # upstream ignores a completed pod's answer
                    self._core.background.assume(
                        pod, self._core.clock(), plugin=plugin, profile=self.profile
                    )
                self._accepted(cycle, pod, options, destination, usage, background=True)
                return True
            self._refused(cycle, pod, options, result)
            return False

    def _precheck(self, cycle: Cycle, pod: objects.Pod) -> Refusal | None:
        if cycle.snapshot.is_evicted(pod):
            return Refusal(Reason.ALREADY_EVICTED, "evicted earlier this cycle", FRAMEWORK)
        if pod.uid in cycle.pdb_blocked:
            return Refusal(
                Reason.PDB_BLOCKED,
                "a PodDisruptionBudget refused it earlier this cycle; not retried",
                FRAMEWORK,
            )
        if pod.uid in cycle.gone:
            return Refusal(Reason.POD_GONE, "the API server no longer has it", FRAMEWORK)
        until = self._core.backoff.resting_until(pod.uid, self._core.clock())
        if until is not None:
            return Refusal(
                Reason.BACKOFF,
                "a PodDisruptionBudget refused it recently; next try after "
                f"{until.strftime('%H:%M:%SZ')}",
                FRAMEWORK,
            )
        if cycle.api_down is not None:
            return Refusal(Reason.API_UNAVAILABLE, cycle.api_down, FRAMEWORK)
        return None

    def _requested_before(self, pod: objects.Pod) -> bool:
        requests = self._core.background
        return requests is not None and bg.requests_background(pod) and pod.uid in requests

    def _carry_out(self, cycle: Cycle, pod: objects.Pod, options: EvictOptions) -> eviction.Result:
        if cycle.dry_run:
            return dryrun.predict(cycle.snapshot, pod)
        if self.evict_plugin is not None:
            return self.evict_plugin[1].evict(pod, options, self._core.backend)
        return self._core.backend.evict(pod, options)

    def _accepted(
        self,
        cycle: Cycle,
        pod: objects.Pod,
        options: EvictOptions,
        destination: str | None,
        usage: Resources | None,
        *,
        background: bool = False,
    ) -> None:
        cycle.snapshot.record_eviction(pod, destination, usage)
        if not cycle.dry_run:
            self._core.backoff.forget(pod.uid)
        cycle.log.evictions.append(
            Eviction(
                pod.key, pod.node_name, options.plugin, options.reason, self.profile, background
            )
        )
        result = "dry_run" if cycle.dry_run else "background" if background else "success"
        self._core.metrics.pods_evicted.labels(
            result, options.plugin, self.profile, pod.namespace, pod.node_name
        ).inc()
        log.info(
            "%s%s pod %s from node %s (plugin %s, profile %s): %s",
            mode(cycle.dry_run),
            "requested eviction in background of" if background else "evicted",
            pod.key,
            pod.node_name,
            options.plugin,
            self.profile,
            options.reason,
        )

    def _refused(
        self, cycle: Cycle, pod: objects.Pod, options: EvictOptions, result: eviction.Result
    ) -> None:
        code, label = _REFUSED[result.outcome]
        if code is Reason.PDB_BLOCKED:
            cycle.pdb_blocked.add(pod.uid)
            if not cycle.dry_run:  # a dry run reads the rests but never adds to them
                self._core.backoff.refused(pod.uid, self._core.clock())
        elif code is Reason.POD_GONE:
            cycle.gone.add(pod.uid)
        elif code is Reason.API_UNAVAILABLE:
            cycle.api_down = f"the API server was unreachable earlier this cycle: {result.message}"
        self._core.metrics.pods_evicted.labels(
            label, options.plugin, self.profile, pod.namespace, pod.node_name
        ).inc()
        self._decisions.skip(pod, plugin=options.plugin, reason=code, detail=result.message)


def _named(refusal: Refusal | None, name: str) -> Refusal | None:
    if refusal is None or refusal.by:
        return refusal
    return dataclasses.replace(refusal, by=name)
