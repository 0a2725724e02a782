"""Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics.

A candidate becomes leader by writing its identity into the Lease; the leader
renews `renewTime` every `retry_period`; others take over only after they have
seen the same record unchanged for `lease_duration` on their own clock (so clock
skew between machines does not matter). Writes use the Lease's resourceVersion,
so two candidates can never both win the same round.

A leader leads until `renew_deadline` after the start of its last successful
round, on the monotonic clock, and not a moment longer, whatever its rounds do:

- every request of a round gets a timeout no longer than the time left before
  that deadline (client-go runs each renew attempt under a context that expires
  at the renew deadline), so a hung connection costs a round, not 30 s;
- `is_leader` compares the clock with the deadline itself, so it turns false at
  the deadline even while a round is still stuck in a request (a timeout bounds
  each socket read, not the whole request);
- a watchdog thread per term wakes at the deadline and steps down (logs it and
  calls `on_stopped`) without waiting for the round.

Since the others wait `lease_duration` > `renew_deadline` from when they saw our
last renewal, which we wrote after our round started, a partitioned leader has
stopped acting before anyone else may start (docs/descheduler.md, "Leader
election"; measured in tests/descheduler/test_leader_partition.py).

Callers: the descheduler (one active replica of two) and the manager.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kube import rest

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError(
                "leader election needs leaseDuration > renewDeadline > retryPeriod > 0, got "
                f"{self.lease_duration}, {self.renew_deadline}, {self.retry_period}"
            )


class Api(Protocol):
    """What the elector needs of a client (`rest.Rest` is one)."""

    def request(
        self, method: str, path: str, *, body: Any = None, timeout: float | None = None
    ) -> Any: ...


class Clock(Protocol):
    """Time as the elector sees it; tests move it by hand."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (deadlines)."""
        ...

    def time(self) -> float:
        """Seconds since the epoch (the Lease's renewTime)."""
        ...

    def wait(self, changed: threading.Condition, timeout: float) -> None:
        """Block on `changed` (held by the caller) until notified or `timeout`
        seconds of this clock have passed; may return early (callers re-check)."""
        ...


class SystemClock:
    """The real clocks."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    def wait(self, changed: threading.Condition, timeout: float) -> None:
        changed.wait(timeout)


def _micro_time(clock: Clock) -> str:
    return dt.datetime.fromtimestamp(clock.time(), dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Runs the election loop; `is_leader` tells whether this process may act."""

    def __init__(
        self,
        client: Api,
        config: Config,
        *,
        on_started: Callable[[], None] | None = None,
        on_stopped: Callable[[], None] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._client = client
        self.config = config
        self._on_started = on_started
        self._on_stopped = on_stopped
        self._clock: Clock = clock or SystemClock()
        # Guards the leading state and the deadline; notified when either changes.
        # The callbacks run under it, so they must not wait for the elector.
        self._changed = threading.Condition()
        self._leader = threading.Event()
        self._deadline = 0.0  # monotonic: leading ends here unless a round renews first
        self._term = 0
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self.observed_holder = ""

    @property
    def is_leader(self) -> bool:
        """Leading, and the renew deadline not reached (read without a lock)."""
        return self._leader.is_set() and self._clock.monotonic() < self._deadline

    def wait_leader(self, timeout: float | None = None) -> bool:
        return self._leader.wait(timeout)

    @property
    def _path(self) -> str:
        return rest.object_path(
            "coordination.k8s.io", "v1", "leases", self.config.name, namespace=self.config.namespace
        )

    def run(self, stop: threading.Event) -> None:
        """Campaign and renew until `stop` is set; release the lease on the way out."""
        try:
            while not stop.is_set():
                self.try_acquire_or_renew()
                stop.wait(self.config.retry_period)
        finally:
            self.release()

    def try_acquire_or_renew(self) -> bool:
        """One round; returns whether we lead afterwards.

        The round may take no longer than the time left before the renew
        deadline (a candidate's: a whole `renew_deadline`); a success counts
        from the round's start, and not at all if it came back too late.
        """
        start = self._clock.monotonic()
        until = self._deadline if self._leader.is_set() else start + self.config.renew_deadline
        try:
            won = self._round(start, until)
        except (rest.ApiError, rest.ApiUnavailable) as err:
            log.warning("leader election %s: %s", self.config.name, err)
            won = False
        with self._changed:
            deadline = start + self.config.renew_deadline
            if won and self._clock.monotonic() < deadline:
                self._deadline = deadline
                self._set_leader(True)
            elif self._leader.is_set() and self._clock.monotonic() >= self._deadline:
                self._expire()
            elif self._leader.is_set() and self.observed_holder not in ("", self.config.identity):
                self._set_leader(False)
        return self.is_leader

    def release(self) -> None:
        """Give the lease up (clear the holder) so a successor need not wait it out."""
        with self._changed:
            if not self._leader.is_set():
                return
            self._set_leader(False)
        until = self._clock.monotonic() + self.config.renew_deadline
        try:
            lease = self._call("GET", self._path, until)
            if lease.get("spec", {}).get("holderIdentity") == self.config.identity:
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["leaseDurationSeconds"] = 1
                self._call("PUT", self._path, until, lease)
        except (rest.ApiError, rest.ApiUnavailable) as err:
            log.info(
                "leader election %s: release failed (%s); the lease will expire",
                self.config.name,
                err,
            )

    def _call(self, method: str, path: str, until: float, body: Any = None) -> Any:
        """One request, timed out at `until` (monotonic) at the latest."""
        left = until - self._clock.monotonic()
        if left <= 0:
            raise rest.ApiUnavailable(f"{method} {path}: no time left before the renew deadline")
        return self._client.request(method, path, body=body, timeout=left)

    def _round(self, now: float, until: float) -> bool:
        me = self.config.identity
        try:
            lease: dict[str, Any] = self._call("GET", self._path, until)
        except rest.ApiError as err:
            if not err.not_found:
                raise
            self._call(
                "POST",
                rest.object_path(
                    "coordination.k8s.io", "v1", "leases", namespace=self.config.namespace
                ),
                until,
                {
                    "metadata": {"name": self.config.name, "namespace": self.config.namespace},
                    "spec": self._spec(acquire=True, transitions=0),
                },
            )
            self.observed_holder = me
            return True
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, str(spec.get("renewTime") or ""))
        if record != self._observed:
            self._observed, self._observed_at = record, now
        self.observed_holder = holder
        duration = float(spec.get("leaseDurationSeconds") or self.config.lease_duration)
        if holder and holder != me and now - self._observed_at < duration:
            return False  # someone else holds a lease that has not expired on our clock
        transitions = int(spec.get("leaseTransitions") or 0)
        lease["spec"] = {
            **spec,
            **self._spec(acquire=holder != me, transitions=transitions + (holder != me)),
        }
        if holder == me:
            lease["spec"]["acquireTime"] = spec.get("acquireTime") or lease["spec"]["acquireTime"]
        try:
            # carries resourceVersion: optimistic lock
            self._call("PUT", self._path, until, lease)
        except rest.ApiError as err:
            if err.conflict:
                return False  # another candidate wrote first
            raise
        self.observed_holder = me
        self._observed = None
        return True

    def _spec(self, *, acquire: bool, transitions: int) -> dict[str, Any]:
        now = _micro_time(self._clock)
        spec: dict[str, Any] = {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": max(1, round(self.config.lease_duration)),
            "renewTime": now,
            "leaseTransitions": transitions,
        }
        if acquire:
            spec["acquireTime"] = now
        return spec

    def _watch(self, term: int) -> None:
        """A term's watchdog: step down at the renew deadline unless renewed first."""
        with self._changed:
            while self._term == term and self._leader.is_set():
                left = self._deadline - self._clock.monotonic()
                if left <= 0:
                    self._expire()
                    return
                self._clock.wait(self._changed, left)

    def _expire(self) -> None:
        log.warning(
            "leader election %s: %s could not renew within %.1fs; stepping down",
            self.config.name,
            self.config.identity,
            self.config.renew_deadline,
        )
        self._set_leader(False)

    def _set_leader(self, leading: bool) -> None:
        """Start or end a term (with `_changed` held): log, callback, watchdog."""
        if leading == self._leader.is_set():
            return
        if leading:
            log.info("leader election %s: %s became leader", self.config.name, self.config.identity)
            self._term += 1
            self._leader.set()
            threading.Thread(
                target=self._watch,
                args=(self._term,),
                name=f"leader-deadline-{self.config.name}",
                daemon=True,
            ).start()
            if self._on_started is not None:
                self._on_started()
        else:
            log.info(
                "leader election %s: %s stopped leading", self.config.name, self.config.identity
            )
            self._leader.clear()
            self._changed.notify_all()
            if self._on_stopped is not None:
                self._on_stopped()
