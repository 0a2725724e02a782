"""The node-side evictor: PDB-aware evictions through the Eviction API, with Events.

Koordinator's koordlet kills containers through the runtime by default, which
bypasses PodDisruptionBudgets; nodeqos always goes through `policy/v1` Eviction
(`kube.eviction.evict`) with a UID precondition, so the API server enforces
budgets and we never evict a namesake created since the decision. Around that:

- dedupe: a pod already terminating, being evicted by another strategy right
  now, or evicted by us within `dedupe_seconds`, is reported ALREADY_EVICTING
  without an API call (strategies run every second, graceful termination takes
  longer);
- a global rate limit: at most `max_evictions` API calls per `window_seconds`
  for the whole node, shared by every strategy;
- per-pod backoff: a 429 (a PodDisruptionBudget would be violated) is reported
  as PDB_BLOCKED and the pod is not tried again for `pdb_backoff_seconds`,
  doubling per further refusal up to `max_backoff_seconds`, so a blocked pod is
  never hammered in a loop; strategies move on to their next candidate (an
  unclassified API failure backs off the same way);
- an Event on the pod for every eviction (and every PDB refusal), so
  `kubectl describe pod` tells why.

Strategies call `Evictor.evict(pod, reason, message)` and get a `Decision`.
`EvictionAPI` is the Protocol over the API server; `KubeEvictionAPI` is the real
one, tests use a fake.
"""

from __future__ import annotations

import collections
import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kube import backoff, events, eviction, rest
from qosmanager import metrics as qmetrics
from qosmanager import states as qstates

log = logging.getLogger(__name__)

Clock = Callable[[], float]
COMPONENT = "nodeqos-agent"


class Decision(enum.Enum):
    """What became of one eviction request; values are metric label values."""

    EVICTED = "evicted"
    PDB_BLOCKED = "pdb_blocked"
    NOT_FOUND = "not_found"
    UID_MISMATCH = "uid_mismatch"
    FORBIDDEN = "forbidden"
    UNAVAILABLE = "unavailable"
    FAILED = "failed"
    ALREADY_EVICTING = "already_evicting"
    RATE_LIMITED = "rate_limited"
    BACKOFF = "backoff"

    @property
    def gone(self) -> bool:
        """The pod is going away or gone: its resources will be released."""
        return self in (Decision.EVICTED, Decision.ALREADY_EVICTING, Decision.NOT_FOUND)


_FROM_OUTCOME = {
    eviction.Outcome.EVICTED: Decision.EVICTED,
    eviction.Outcome.PDB_BLOCKED: Decision.PDB_BLOCKED,
    eviction.Outcome.NOT_FOUND: Decision.NOT_FOUND,
    eviction.Outcome.UID_MISMATCH: Decision.UID_MISMATCH,
    eviction.Outcome.FORBIDDEN: Decision.FORBIDDEN,
    eviction.Outcome.UNAVAILABLE: Decision.UNAVAILABLE,
    eviction.Outcome.FAILED: Decision.FAILED,
}


class EvictionAPI(Protocol):
    """The API server as the evictor uses it."""

    def evict(self, namespace: str, name: str, uid: str) -> eviction.Result:
        """POST the pod's eviction subresource with a UID precondition."""
        ...

    def record(self, pod: qstates.PodMeta, event_type: str, reason: str, message: str) -> None:
        """Write an Event on the pod (best effort)."""
        ...


class KubeEvictionAPI:
    """`EvictionAPI` over a real API server (`kube.eviction` + `kube.events`)."""

    def __init__(
        self,
        client: rest.Rest,
        recorder: events.Recorder,
        *,
        grace_period_seconds: int | None = None,
    ) -> None:
        self._client = client
        self._recorder = recorder
        self._grace = grace_period_seconds

    def evict(self, namespace: str, name: str, uid: str) -> eviction.Result:
        return eviction.evict(
            self._client, namespace, name, uid=uid, grace_period_seconds=self._grace
        )

    def record(self, pod: qstates.PodMeta, event_type: str, reason: str, message: str) -> None:
        ref = events.ObjectRef(kind="Pod", name=pod.name, namespace=pod.namespace, uid=pod.uid)
        self._recorder.event(ref, event_type, reason, message)


@dataclass(frozen=True, slots=True, kw_only=True)
class EvictorConfig:
    """Limits of the evictor; the defaults suit a node under pressure."""

    max_evictions: int = 10
    window_seconds: float = 60.0
    pdb_backoff_seconds: float = 30.0
    max_backoff_seconds: float = 600.0
    dedupe_seconds: float = 300.0


@dataclass(frozen=True, slots=True)
class _Backoff:
    until: float
    delay: float


class Evictor:
    """Evicts pods for the strategies; thread-safe."""

    def __init__(
        self,
        api: EvictionAPI,
        *,
        metrics: qmetrics.QoSMetrics,
        clock: Clock = time.monotonic,
        config: EvictorConfig = EvictorConfig(),
    ) -> None:
        self._api = api
        self._metrics = metrics
        self._clock = clock
        self.config = config
        self._lock = threading.Lock()
        self._calls: collections.deque[float] = collections.deque()
        self._evicted: dict[str, float] = {}  # pod uid -> dedupe expiry
        self._in_flight: set[str] = set()  # pod uids with an API call under way
        self._backoff: dict[str, _Backoff] = {}  # pod uid -> next attempt
        self._delays = backoff.ItemExponential(  # pod uid -> refusals in a row
            backoff.Policy(
                initial=config.pdb_backoff_seconds,
                cap=max(config.pdb_backoff_seconds, config.max_backoff_seconds),
            )
        )

    def evict(self, pod: qstates.PodMeta, reason: str, message: str) -> Decision:
        """Evict `pod` for strategy `reason` (e.g. "BEMemoryEvict"), explaining `message`."""
        with self._lock:
            decision = self._precheck(pod)
            if decision is None:
                self._calls.append(self._clock())
                self._in_flight.add(pod.uid)
        if decision is None:
            result = self._api.evict(pod.namespace, pod.name, pod.uid)
            decision = _FROM_OUTCOME[result.outcome]
            with self._lock:
                self._in_flight.discard(pod.uid)
                self._settle(pod, decision)
            self._report(pod, reason, message, decision, result.message)
        self._metrics.eviction_attempts.labels(reason, decision.value).inc()
        if decision is Decision.EVICTED:
            self._metrics.pod_evictions.labels(reason).inc()
        return decision

    def _precheck(self, pod: qstates.PodMeta) -> Decision | None:
        """A decision made without the API, or None to go ahead (lock held)."""
        now = self._clock()
        self._expire(now)
        if pod.pod.is_terminating or pod.uid in self._evicted or pod.uid in self._in_flight:
            return Decision.ALREADY_EVICTING
        backoff = self._backoff.get(pod.uid)
        if backoff is not None and backoff.until > now:
            return Decision.BACKOFF
        if len(self._calls) >= self.config.max_evictions:
            return Decision.RATE_LIMITED
        return None

    def _expire(self, now: float) -> None:
        while self._calls and self._calls[0] <= now - self.config.window_seconds:
            self._calls.popleft()
        for uid in [u for u, until in self._evicted.items() if until <= now]:
            del self._evicted[uid]
        # an entry outlives its wait by max_backoff, so a pod refused again soon
        # after waits longer; then its history is forgotten
        horizon = now - self.config.max_backoff_seconds
        for uid in [u for u, b in self._backoff.items() if b.until <= horizon]:
            del self._backoff[uid]
            self._delays.forget(uid)

    def _settle(self, pod: qstates.PodMeta, decision: Decision) -> None:
        now = self._clock()
        if decision.gone:
            self._evicted[pod.uid] = now + self.config.dedupe_seconds
            self._backoff.pop(pod.uid, None)
            self._delays.forget(pod.uid)
        elif decision in (Decision.PDB_BLOCKED, Decision.FAILED):
            delay = self._delays.when(pod.uid)
            self._backoff[pod.uid] = _Backoff(now + delay, delay)

    def backoff_remaining(self, uid: str) -> float:
        """Seconds until the pod may be tried again (0 when it may be now)."""
        with self._lock:
            entry = self._backoff.get(uid)
            return max(0.0, entry.until - self._clock()) if entry else 0.0

    def _report(
        self, pod: qstates.PodMeta, reason: str, message: str, decision: Decision, detail: str
    ) -> None:
        if decision is Decision.EVICTED:
            log.info("evicted pod %s (%s): %s", pod.key, reason, message)
            self._api.record(
                pod, events.WARNING, "Evicted", f"evicted by {COMPONENT} ({reason}): {message}"
            )
        elif decision is Decision.PDB_BLOCKED:
            wait = self.backoff_remaining(pod.uid)
            log.warning("eviction of %s (%s) blocked by a PodDisruptionBudget", pod.key, reason)
            self._api.record(
                pod,
                events.WARNING,
                "EvictionBlocked",
                f"{COMPONENT} could not evict the pod ({reason}: {message}): "
                f"a PodDisruptionBudget forbids it; next attempt in {wait:.0f}s. {detail}",
            )
        elif decision is not Decision.NOT_FOUND:
            log.warning(
                "eviction of %s (%s) failed: %s %s", pod.key, reason, decision.value, detail
            )
