"""Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics.

A candidate becomes leader by writing its identity into the Lease; the leader
renews `renewTime` every `retry_period`; others take over only after they have
seen the same record unchanged for `lease_duration` on their own clock (so clock
skew between machines does not matter), and a leader that cannot renew within
`renew_deadline` steps down. Writes use the Lease's resourceVersion, so two
candidates can never both win the same round.

Callers: the descheduler (one active replica of two) and its controllers.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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


def _micro_time(clock: Callable[[], float]) -> str:
    return dt.datetime.fromtimestamp(clock(), dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Runs the election loop; `is_leader` tells whether this process may act."""

    def __init__(
        self,
        client: rest.Rest,
        config: Config,
        *,
        on_started: Callable[[], None] | None = None,
        on_stopped: Callable[[], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self.config = config
        self._on_started = on_started
        self._on_stopped = on_stopped
        self._monotonic = monotonic
        self._wall = wall
        self._leader = threading.Event()
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._renewed_at = 0.0
        self.observed_holder = ""

    @property
    def is_leader(self) -> bool:
        return self._leader.is_set()

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
        """One round; returns whether we hold the lease afterwards."""
        now = self._monotonic()
        try:
            won = self._round(now)
        except (rest.ApiError, rest.ApiUnavailable) as err:
            log.warning("leader election %s: %s", self.config.name, err)
            won = False
        if won:
            self._renewed_at = now
            self._set_leader(True)
        elif self.is_leader and now - self._renewed_at > self.config.renew_deadline:
            log.warning(
                "leader election %s: could not renew within %.0fs; stepping down",
                self.config.name,
                self.config.renew_deadline,
            )
            self._set_leader(False)
        elif self.is_leader and self.observed_holder not in ("", self.config.identity):
            self._set_leader(False)
        return self.is_leader

    def release(self) -> None:
        """Give the lease up (clear the holder) so a successor need not wait it out."""
        if not self.is_leader:
            return
        self._set_leader(False)
        try:
            lease = self._client.get(self._path)
            if lease.get("spec", {}).get("holderIdentity") == self.config.identity:
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["leaseDurationSeconds"] = 1
                self._client.replace(self._path, lease)
        except (rest.ApiError, rest.ApiUnavailable) as err:
            log.info(
                "leader election %s: release failed (%s); the lease will expire",
                self.config.name,
                err,
            )

    def _round(self, now: float) -> bool:
        me = self.config.identity
        try:
            lease: dict[str, Any] = self._client.get(self._path)
        except rest.ApiError as err:
            if not err.not_found:
                raise
            self._client.create(
                rest.object_path(
                    "coordination.k8s.io", "v1", "leases", namespace=self.config.namespace
                ),
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
            self._client.replace(self._path, lease)  # carries resourceVersion: optimistic lock
        except rest.ApiError as err:
            if err.conflict:
                return False  # another candidate wrote first
            raise
        self.observed_holder = me
        self._observed = None
        return True

    def _spec(self, *, acquire: bool, transitions: int) -> dict[str, Any]:
        now = _micro_time(self._wall)
        spec: dict[str, Any] = {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": max(1, round(self.config.lease_duration)),
            "renewTime": now,
            "leaseTransitions": transitions,
        }
        if acquire:
            spec["acquireTime"] = now
        return spec

    def _set_leader(self, leading: bool) -> None:
        if leading == self.is_leader:
            return
        if leading:
            log.info("leader election %s: %s became leader", self.config.name, self.config.identity)
            self._leader.set()
            if self._on_started is not None:
                self._on_started()
        else:
            log.info(
                "leader election %s: %s stopped leading", self.config.name, self.config.identity
            )
            self._leader.clear()
            if self._on_stopped is not None:
                self._on_stopped()
