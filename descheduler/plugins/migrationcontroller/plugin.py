"""MigrationController: Koordinator's evictor, where an eviction becomes a PodMigrationJob.

The plugin serves three extension points and the controller form:

- `filter(pod)`: the checks waiting cannot change (`filters`), then the
  limits (`limits`) against every
  unfinished job and every eviction earlier in the cycle, so a plugin never
  queues more migrations than could run; a pod that already has an
  unfinished job is refused. Without an API client (`simulate`) the same
  checks run on the snapshot alone;
- `pre_eviction_filter(pod)`: DefaultEvictor's nodeFit, when `nodeFit` is on;
- `evict(pod, ...)`: creates a PodMigrationJob (EvictDirectly, `defaultJobTTL`,
  `defaultDeleteOptions`, Koordinator's annotations naming the plugin, the
  reason and this instance) and returns at once; the controller carries it
  out. `dryRun` (the plugin's own) logs and creates nothing; the framework's
  dry-run never calls `evict`;
- `run(stop)`: the controller (`controller`), woken by job events and by events
  of the pods its jobs point at. The framework runs it only while this replica
  leads; `stop` ends with the term, and `evict` refuses when it is not running,
  so no job is created that nobody would carry out. In a dry run it only keeps
  the caches the filter reads, and writes nothing.

`defaultJobMode: ReservationFirst` (Koordinator's default) needs Koordinator's
koord-scheduler and Reservation objects; the plugin refuses to start with it
rather than quietly evicting directly.
"""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import datetime, timedelta

from descheduler.config import PluginArgs, fields
from descheduler.evictions import Backend, EvictOptions
from descheduler.framework import Handle, Reason, Refusal
from descheduler.plugins.migrationcontroller import arbitration, jobs, state, workloads
from descheduler.plugins.migrationcontroller.arbitration import Action
from descheduler.plugins.migrationcontroller.args import JobMode, MigrationControllerArgs
from descheduler.plugins.migrationcontroller.controller import RESYNC, Controller
from descheduler.plugins.migrationcontroller.executors import Executor
from descheduler.plugins.migrationcontroller.filters import StaticChecks
from descheduler.plugins.migrationcontroller.limits import (
    NAMESPACE,
    Caps,
    LimiterKey,
    Migration,
    ObjectLimiters,
    Tally,
    Workload,
)
from kube import cache, eviction, migration, objects, rest

log = logging.getLogger("descheduler.migrationcontroller")

NAME = "MigrationController"
SYNC_WAIT = 10.0  # seconds the first filter call waits for the caches
PRIORITY_CLASS_TTL = timedelta(minutes=1)
RESERVATION_FIRST_UNSUPPORTED = (
    "defaultJobMode ReservationFirst needs Koordinator's koord-scheduler and Reservation "
    "objects, which nodeqos does not run; set defaultJobMode: EvictDirectly"
)


class MigrationController:
    """Evict and filter plugin, and the controller of the jobs its evictions become."""

    name = NAME

    def __init__(self, args: MigrationControllerArgs, handle: Handle) -> None:
        if args.default_job_mode is JobMode.RESERVATION_FIRST:
            raise ValueError(RESERVATION_FIRST_UNSUPPORTED)
        self.args = args
        self._handle = handle
        self.instance = str(uuid.uuid4())  # this process's jobs: koordinator.sh/job-created-by
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._term: threading.Event | None = None
        self._waited_for_sync = False
        self._priority_classes: dict[str, tuple[datetime, int | None]] = {}
        self.checks = StaticChecks(args, handle, self._priority_class)
        self.caps = Caps.of(args)
        self.limiters = ObjectLimiters(args.object_limiters, args.max_migrating_per_workload)
        self.caches: state.Caches | None = None
        self.controller: Controller | None = None
        client = handle.client
        if client is not None:
            self.caches = state.Caches(client, self._wake.set)
            self.controller = Controller(
                args=args,
                client=client,
                recorder=handle.recorder,
                clock=handle.clock,
                caches=self.caches,
                checks=self.checks,
                limiters=self.limiters,
                executor=Executor(
                    client,
                    handle.recorder,
                    policy=args.eviction_policy,
                    qps=args.evict_qps,
                    burst=args.evict_burst,
                    clock=handle.clock,
                ),
                instance=self.instance,
                lock=self._lock,
            )

    # -- filter -------------------------------------------------------------------------

    def filter(self, pod: objects.Pod) -> Refusal | None:
        snapshot = self._handle.snapshot()
        now = self._handle.clock()
        in_flight: list[Migration] = []
        pods: workloads.PodSource
        owners: workloads.OwnerSource | None
        if self.caches is None or self.controller is None:
            pods, owners = state.SnapshotPods(snapshot), None
        else:
            waiting = self._caches_waiting()
            if waiting:
                return Refusal(Reason.NOT_SYNCED, waiting)
            pods = owners = self.caches
            for job in self.caches.jobs():
                if not self.controller.alive(job, now):
                    continue
                found = self.controller.migration_of(job)
                if found.same_pod(_migration(pod, admitted=False)):
                    return Refusal(
                        Reason.FILTERED,
                        f"pod already has PodMigrationJob {job.metadata.name} "
                        f"({jobs.phase(job).value})",
                    )
                in_flight.append(found)
        for evicted in snapshot.evicted:  # this cycle's, whose jobs the cache may not show yet
            queued = _migration(evicted, admitted=False)
            if not any(m.same_pod(queued) for m in in_flight):
                in_flight.append(queued)
        candidate = _migration(pod, admitted=False)
        workload = workloads.resolve(pod, pods, owners)
        if isinstance(workload, workloads.Unresolved):
            return Refusal(Reason.NOT_SYNCED, workload.reason)
        tally = Tally(in_flight, pending=True)
        with self._lock:
            verdict = arbitration.judge(
                pod,
                candidate,
                workload,
                checks=self.checks,
                caps=self.caps,
                tally=tally,
                limiters=self.limiters,
                now=now,
                reserved=lambda key: _queued_for(key, candidate, workload, tally),
            )
        if verdict.action is Action.FAIL:
            return Refusal(Reason.FILTERED, verdict.detail)
        if verdict.action is Action.WAIT:
            return Refusal(Reason.LIMIT_REACHED, verdict.detail)
        return None

    def pre_eviction_filter(self, pod: objects.Pod) -> Refusal | None:
        return self.checks.pre_eviction_filter(pod)

    # -- evict --------------------------------------------------------------------------

    def evict(self, pod: objects.Pod, options: EvictOptions, backend: Backend) -> eviction.Result:
        """Queue the eviction as a PodMigrationJob (`backend` is not used)."""
        if self.args.dry_run:
            log.info(
                "dryRun: %s would migrate pod %s (%s); no PodMigrationJob created",
                options.plugin,
                pod.key,
                options.reason,
            )
            return eviction.Result(eviction.Outcome.EVICTED, "dryRun: no PodMigrationJob created")
        client = self._handle.client
        if client is None or self.caches is None or not self._serving():
            return eviction.Result(
                eviction.Outcome.UNAVAILABLE,
                "the MigrationController is not running here (this replica does not lead)",
            )
        refusal = self.filter(pod)
        if refusal is not None:
            return eviction.Result(eviction.Outcome.FAILED, f"{NAME}: {refusal}")
        job = jobs.new_job(
            pod,
            name=str(uuid.uuid4()),
            mode=migration.PodMigrationJobMode(self.args.default_job_mode.value),
            ttl=self.args.default_job_ttl,
            delete_options=self._delete_options(),
            trigger=options.plugin,
            reason=options.reason,
            instance=self.instance,
        )
        try:
            raw = client.create(cache.PODMIGRATIONJOBS.path(), job.to_api())
        except rest.ApiUnavailable as err:
            return eviction.Result(eviction.Outcome.UNAVAILABLE, str(err))
        except rest.ApiError as err:
            outcome = eviction.Outcome.FORBIDDEN if err.status == 403 else eviction.Outcome.FAILED
            return eviction.Result(outcome, f"creating a PodMigrationJob: {err.message}")
        created = jobs.parse(raw) if isinstance(raw, dict) else None
        if created is not None:
            self.caches.remember(created)
        self._wake.set()
        log.info(
            "PodMigrationJob %s created for pod %s on node %s (%s: %s)",
            job.metadata.name,
            pod.key,
            pod.node_name,
            options.plugin,
            options.reason,
        )
        return eviction.Result(
            eviction.Outcome.EVICTED, f"PodMigrationJob {job.metadata.name} created"
        )

    def _delete_options(self) -> dict[str, object] | None:
        chosen = self.args.default_delete_options
        if chosen is None:
            return None
        return {k: v for k, v in fields.encode_object(chosen).items() if v not in ([], ())}

    # -- the controller -------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Reconcile jobs until `stop` (the end of this replica's term) is set."""
        if self.caches is None or self.controller is None:
            log.warning("%s has no API client: no PodMigrationJob is carried out", NAME)
            stop.wait()
            return
        threading.Thread(
            target=self._wake_on, args=(stop,), name="migrationcontroller-stop", daemon=True
        ).start()
        self.caches.start()
        self._waited_for_sync = False
        self._term = stop
        try:
            while not stop.is_set() and not self.caches.wait_synced(0.2):
                pass
            if self._handle.dry_run:  # keep the filter's caches, write nothing
                stop.wait()
                return
            log.info("%s: reconciling PodMigrationJobs (instance %s)", NAME, self.instance)
            while not stop.is_set():
                self._wake.clear()
                try:
                    delay = self.controller.reconcile()
                # A controller outlives any one pass: an unexpected error in one
                # (an API answer we did not foresee) must not end migrations for
                # the rest of the term. The runner's isolation would end the loop.
                except Exception:
                    log.exception("%s: reconcile pass failed", NAME)
                    delay = RESYNC
                self._wake.wait(delay)
        finally:
            self._term = None
            self.caches.stop()

    def _wake_on(self, stop: threading.Event) -> None:
        stop.wait()
        self._wake.set()

    def wake(self) -> None:
        """Ask for a reconcile pass now (tests, after moving an injected clock)."""
        self._wake.set()

    def _serving(self) -> bool:
        term = self._term
        return term is not None and not term.is_set() and self.caches is not None

    def _caches_waiting(self) -> str:
        """Why the filter cannot use the caches yet ("" when it can).

        The first call of a term waits up to SYNC_WAIT for them (a cycle may
        start right after leadership does); later calls do not wait.
        """
        caches = self.caches
        if caches is None or not self._serving():
            return "the MigrationController is not running here (it runs on the leader only)"
        if not caches.synced and not self._waited_for_sync:
            self._waited_for_sync = True
            caches.wait_synced(SYNC_WAIT)
        if caches.synced:
            return ""
        return f"the MigrationController's caches have not synced: {caches.unsynced()}"

    def _priority_class(self, name: str) -> int | None:
        """A PriorityClass's value (cached a minute), for a named threshold between cycles."""
        now = self._handle.clock()
        cached = self._priority_classes.get(name)
        if cached is not None and now - cached[0] < PRIORITY_CLASS_TTL:
            return cached[1]
        value = None
        client = self._handle.client
        if client is not None:
            path = rest.object_path("scheduling.k8s.io", "v1", "priorityclasses", name)
            try:
                value = int(client.get(path).get("value", 0))
            except (rest.ApiError, rest.ApiUnavailable) as err:
                log.info("PriorityClass %s: %s", name, err)
        self._priority_classes[name] = (now, value)
        return value


def _migration(pod: objects.Pod, *, admitted: bool) -> Migration:
    controller = pod.controller_ref
    return Migration(
        pod.uid,
        pod.key,
        pod.namespace,
        pod.node_name,
        controller.uid if controller else "",
        admitted,
    )


def _queued_for(
    key: LimiterKey, candidate: Migration, workload: Workload | None, tally: Tally
) -> int:
    """Tokens promised to migrations queued but not admitted (the filter's view)."""
    queued = [m for m in tally.others(candidate) if not m.admitted]
    if key.kind == NAMESPACE:
        return sum(1 for m in queued if m.namespace == key.key)
    if workload is None:
        return 0
    return sum(1 for m in queued if m.owner and m.owner in workload.members)


def factory(args: PluginArgs, handle: Handle) -> MigrationController:
    return MigrationController(MigrationControllerArgs.narrow(args, NAME), handle)
