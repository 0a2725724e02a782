"""Who may act: leader election gating cycles, controllers and evictions.

Two replicas run; only the one holding the Lease (`kube.leaderelection`) runs
descheduling cycles and controller plugins. Each stretch of leadership is a
*term*, an Event that is set the moment leadership ends (lost lease, failed
renewal, shutdown): the daemon waits on it between cycles and hands it to the
controllers as their stop signal, so they stop at once. A cycle already running
cannot be cut in half, so `LeaderOnly` wraps the eviction backend and refuses
every eviction once this replica no longer leads: the evictor then records
`api_unavailable` for the rest of that cycle without calling the API server.
Underneath, evictions and controller writes go through `Rest.guarded`, which
checks again the moment before sending. "No longer leads" is the elector's own
answer, false from the renew deadline on even while a renewal hangs
(`kube.leaderelection`), not only once its `stopped` callback has run.

client-go's `OnStoppedLeading` in kubernetes-sigs/descheduler exits the
process; here a replica that lost the lease goes back to campaigning instead,
which ends in the same place without a restart.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable

from prometheus_client import Gauge

from descheduler import config
from descheduler.app.health import State
from descheduler.evictions import Backend, EvictOptions
from kube import eviction, leaderelection, objects, rest

log = logging.getLogger("descheduler.leader")

LOCKS = ("leases",)  # client-go's other locks are deprecated, and removed since 1.24


def identity() -> str:
    """hostname_pid_uuid: unique per process, readable in the Lease."""
    return f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


class Leadership:
    """Whether this replica may act now; build it with `elected` or `alone`."""

    def __init__(self, gauge: Gauge) -> None:
        self._gauge = gauge
        self._leading = threading.Event()
        self._term = threading.Event()
        self._lock = threading.Lock()
        self.elector: leaderelection.LeaderElector | None = None
        self._thread: threading.Thread | None = None
        self._stopping: threading.Event | None = None

    @classmethod
    def alone(cls, gauge: Gauge) -> Leadership:
        """Leader election off: this replica always leads."""
        found = cls(gauge)
        found.started()
        return found

    @classmethod
    def elected(
        cls, client: rest.Rest, settings: config.LeaderElection, name: str, gauge: Gauge
    ) -> Leadership:
        """Campaign on the Lease `settings` names; raises ValueError for unusable settings."""
        if settings.resource_lock not in LOCKS:
            raise ValueError(
                f"leaderElection.resourceLock: {settings.resource_lock!r} is not supported; "
                f"use {', '.join(LOCKS)}"
            )
        found = cls(gauge)
        found.elector = leaderelection.LeaderElector(
            client,
            leaderelection.Config(
                namespace=settings.resource_namespace,
                name=settings.resource_name,
                identity=name,
                lease_duration=settings.lease_duration.total_seconds(),
                renew_deadline=settings.renew_deadline.total_seconds(),
                retry_period=settings.retry_period.total_seconds(),
            ),
            on_started=found.started,
            on_stopped=found.stopped,
        )
        return found

    # -- state -------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """Leading now: the elector's own answer too, which turns false at the renew
        deadline itself, a moment before its `stopped` callback ends the term."""
        return self._leading.is_set() and (self.elector is None or self.elector.is_leader)

    def wait_leader(self, timeout: float | None = None) -> bool:
        return self._leading.wait(timeout)

    @property
    def term(self) -> threading.Event:
        """The current term: set when this stretch of leadership ends."""
        with self._lock:
            return self._term

    def end_term(self) -> None:
        """End the current term without giving up the lease (shutdown)."""
        with self._lock:
            self._term.set()

    def started(self) -> None:
        """The elector's callback: a term begins (tests call it to play the elector)."""
        with self._lock:
            self._term = threading.Event()
            self._leading.set()
        self._gauge.set(1)

    def stopped(self) -> None:
        """The elector's callback: the term ends at once."""
        with self._lock:
            self._leading.clear()
            self._term.set()
        self._gauge.set(0)
        if self._stopping is not None and self._stopping.is_set():
            log.info("shutting down: giving the leader lease up")
        elif self.elector is not None:
            log.warning("lost the leader lease: cycles and controllers stop now")

    # -- running -----------------------------------------------------------------

    def start(self, stop: threading.Event) -> None:
        """Campaign in a daemon thread until `stop` (then release the lease)."""
        self._stopping = stop
        if self.elector is None:
            return
        self._thread = threading.Thread(
            target=self.elector.run, args=(stop,), name="leader-election", daemon=True
        )
        self._thread.start()

    def join(self, timeout: float) -> None:
        """Wait for the campaign to end (after `stop`): the lease is released then."""
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("leader election did not end within %.0fs", timeout)

    def health(self) -> State:
        """A follower is healthy: it is ready to take over."""
        if self.elector is None:
            return State(True, "leader election disabled; this replica always leads")
        me = self.elector.config.identity
        if self.is_leader:
            return State(True, f"leader ({me})")
        holder = self.elector.observed_holder or "none yet"
        return State(True, f"follower ({me}); leader: {holder}")


class LeaderOnly:
    """A backend that evicts only while `may_act()` (leading, not shutting down)."""

    def __init__(self, backend: Backend, may_act: Callable[[], bool]) -> None:
        self._backend = backend
        self._may_act = may_act
        self.name = backend.name

    def evict(self, pod: objects.Pod, options: EvictOptions) -> eviction.Result:
        if not self._may_act():
            return eviction.Result(
                eviction.Outcome.UNAVAILABLE,
                "this replica no longer leads (or is shutting down); eviction not attempted",
            )
        return self._backend.evict(pod, options)
