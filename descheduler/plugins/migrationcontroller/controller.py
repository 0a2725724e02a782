"""The PodMigrationJob controller: one reconcile pass over every job, run on the leader.

A pass (`reconcile`), over the caches (`state.Caches`) plus this process's own writes:

1. scavenge, once a minute: delete jobs older than their TTL + 5 minutes (30
   minutes without a TTL), whoever created them (Koordinator's scavenger);
2. for each unfinished job this instance serves (created by it, or written by
   hand: no `koordinator.sh/job-created-by`; another instance's jobs are left
   alone): paused jobs are skipped; past its TTL → Failed/Timeout; no pod
   reference → Failed/InvalidPodRef; a ReservationFirst job → Failed/UnsupportedMode;
3. Running jobs move on: evict the pod (`executors`, rate-limited), then wait
   for it to go → Eviction condition True/EvictComplete, Succeeded/Complete; a
   pod gone before its eviction → Failed/MissingPod; a refused eviction (a
   PodDisruptionBudget) → condition FailedEvict and a retry with backoff
   until the TTL;
4. Pending jobs are arbitrated (`arbitration`): admitted ones become Running at
   once (their object-limiter tokens taken now) and are evicted in the same
   pass; the ones that can never pass fail with ForbiddenMigratePod; the rest
   wait for the next pass.

Only Running jobs take concurrency slots. Every transition is one status write
(`writes`: PUT /status with the resourceVersion read, so a conflict skips the
job until the next pass) and, where Koordinator records one, an Event on the
job. A job waiting in the queue says why in its message.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from descheduler.plugins.migrationcontroller import arbitration, jobs, workloads
from descheduler.plugins.migrationcontroller.arbitration import Action, Candidate
from descheduler.plugins.migrationcontroller.args import JobMode, MigrationControllerArgs
from descheduler.plugins.migrationcontroller.executors import Executor
from descheduler.plugins.migrationcontroller.filters import StaticChecks
from descheduler.plugins.migrationcontroller.jobs import ConditionType, JobReason, Phase
from descheduler.plugins.migrationcontroller.limits import Caps, Migration, ObjectLimiters, Tally
from descheduler.plugins.migrationcontroller.state import Caches
from descheduler.plugins.migrationcontroller.writes import Writer
from kube import backoff, events, eviction, migration, rest
from kube.migration import Condition, PodMigrationJob

log = logging.getLogger("descheduler.migrationcontroller")

SCAVENGE_EVERY = timedelta(minutes=1)
RESYNC = 3.0  # seconds: Koordinator's defaultRequeueAfter for jobs waiting on a pod
IDLE = 60.0
MIN_WAIT = 0.01  # never spin, whatever a pass computed
RETRY_FIRST, RETRY_MAX = timedelta(seconds=1), timedelta(minutes=1)
_GONE = (eviction.Outcome.NOT_FOUND, eviction.Outcome.UID_MISMATCH)


class Controller:
    """Reconciles PodMigrationJobs; `reconcile()` is one pass, returning seconds to the next."""

    def __init__(
        self,
        *,
        args: MigrationControllerArgs,
        client: rest.Rest,
        recorder: events.Recorder | None,
        clock: Callable[[], datetime],
        caches: Caches,
        checks: StaticChecks,
        limiters: ObjectLimiters,
        executor: Executor,
        instance: str,
        lock: threading.Lock,
    ) -> None:
        self.args = args
        self.caps = Caps.of(args)
        self.resync = RESYNC
        self._writer = Writer(client, recorder, caches)
        self._clock = clock
        self._caches = caches
        self._checks = checks
        self._limiters = limiters
        self._executor = executor
        self._instance = instance
        self._lock = lock  # guards limiters and facts (the filter reads them too)
        self.facts: dict[str, Migration] = {}  # job name -> its pod, once seen
        self._retry_at: dict[str, tuple[datetime, timedelta]] = {}
        self._retries = backoff.ItemExponential(  # job name -> failed evictions in a row
            backoff.Policy(initial=RETRY_FIRST.total_seconds(), cap=RETRY_MAX.total_seconds())
        )
        self._waiting: dict[str, str] = {}  # job name -> last logged wait reason
        self._scavenged_at: datetime | None = None
        self.passes = 0  # reconcile passes so far (observable in tests and logs)

    # -- questions the plugin shares --------------------------------------------------

    def serves(self, job: PodMigrationJob) -> bool:
        """Jobs this instance created, and jobs written by hand."""
        creator = jobs.created_by(job)
        return creator is None or creator == self._instance

    def alive(self, job: PodMigrationJob, now: datetime) -> bool:
        """Unfinished, and (another instance's) not presumed dead."""
        if jobs.is_terminal(job):
            return False
        if self.serves(job):
            return True
        until = jobs.presumed_alive_until(job)
        return until is None or now < until

    def migration_of(self, job: PodMigrationJob) -> Migration:
        """The job's pod as the limits see it; remembered once seen, for after it is gone."""
        ref = job.spec.pod_ref
        key = f"{ref.namespace}/{ref.name}"
        pod = self._caches.pod(key)
        name = job.metadata.name
        admitted = jobs.phase(job) is Phase.RUNNING
        with self._lock:
            known = self.facts.get(name)
            if pod is not None and (not ref.uid or pod.uid == ref.uid) and known is None:
                controller = pod.controller_ref
                known = Migration(
                    pod.uid, key, pod.namespace, pod.node_name, controller.uid if controller else ""
                )
                self.facts[name] = known
        if known is None:
            known = Migration(ref.uid, key, ref.namespace)
        return dataclasses.replace(known, admitted=admitted)

    # -- the pass ---------------------------------------------------------------------

    def reconcile(self) -> float:
        self.passes += 1
        now = self._clock()
        everything = self._caches.jobs()
        if self._scavenged_at is None or now - self._scavenged_at >= SCAVENGE_EVERY:
            everything = self._scavenge(everything, now)
            self._scavenged_at = now
        due: list[float] = [IDLE]
        mine: list[PodMigrationJob] = []
        for job in everything:
            if not self.serves(job) or jobs.is_terminal(job) or job.spec.paused:
                continue
            left = self._precheck(job, now)
            if left is not None:
                mine.append(job)
                if left > 0:
                    due.append(left)
        self._caches.watch_pods(frozenset(jobs.pod_key(j) for j in mine))
        running = [j for j in mine if jobs.phase(j) is Phase.RUNNING]
        for job in running:
            due.append(self._progress(job, now))
        pending = [j for j in mine if jobs.phase(j) is Phase.PENDING]
        if pending:
            # read again: the jobs finished above no longer hold a slot
            everything = self._caches.jobs()
            due.append(self._arbitrate(pending, everything, now))
        self._forget({j.metadata.name for j in everything if self.alive(j, now)}, now)
        return max(MIN_WAIT, min(due))

    def _precheck(self, job: PodMigrationJob, now: datetime) -> float | None:
        """Fail what must fail before anything else; else seconds to its deadline (0: none)."""
        end = jobs.deadline(job)
        if end is not None and now >= end:
            self._finish(job, JobReason.TIMEOUT, "Abort job caused by timeout")
            return None
        ref = job.spec.pod_ref
        if not ref.namespace or not ref.name:
            self._finish(job, JobReason.INVALID_POD_REF, "Abort job caused by invalid PodRef")
            return None
        mode = job.spec.mode or migration.PodMigrationJobMode(self.args.default_job_mode.value)
        if mode.value == JobMode.RESERVATION_FIRST:
            self._finish(
                job,
                JobReason.UNSUPPORTED_MODE,
                "ReservationFirst needs Koordinator's koord-scheduler and Reservation objects, "
                "which nodeqos does not run; use mode EvictDirectly",
            )
            return None
        return 0.0 if end is None else (end - now).total_seconds()

    # -- Running jobs -----------------------------------------------------------------

    def _progress(self, job: PodMigrationJob, now: datetime) -> float:
        """Evict the pod, or see it gone; seconds until this job wants another look."""
        ref = job.spec.pod_ref
        key = jobs.pod_key(job)
        evicting = jobs.condition(job, ConditionType.EVICTION)
        pod = self._caches.pod(key)
        uid = ref.uid or self.migration_of(job).pod_uid
        if pod is None or (uid and pod.uid != uid):
            if evicting is not None and evicting.reason == JobReason.EVICTING:
                self._complete(job, now)
            elif self._writer.pod_gone(key, uid):
                self._finish(job, JobReason.MISSING_POD, f'Abort job caused by missing Pod "{key}"')
            return self.resync
        if evicting is not None and evicting.reason == JobReason.EVICTING:
            return self.resync  # evicted; waiting for the pod to go (or for SoftEviction)
        retry = self._retry_at.get(job.metadata.name)
        if retry is not None and now < retry[0]:
            return (retry[0] - now).total_seconds()
        wait = self._executor.wait()
        if wait > timedelta(0):
            return wait.total_seconds()
        result = self._executor.evict(job, pod)
        _, reason = jobs.eviction_trigger_and_reason(job)
        if result.ok:
            self._retry_at.pop(job.metadata.name, None)
            self._retries.forget(job.metadata.name)
            message = f'Pod "{key}" evicted from node "{pod.node_name}" by the reason "{reason}"'
            self._set_condition(job, now, JobReason.EVICTING, message, events.NORMAL)
            return self.resync
        if result.outcome in _GONE:
            self._finish(job, JobReason.MISSING_POD, f'Abort job caused by missing Pod "{key}"')
            return self.resync
        delay = timedelta(seconds=self._retries.when(job.metadata.name))
        self._retry_at[job.metadata.name] = (now + delay, delay)
        message = f'Failed evict Pod "{key}" caused by {result.outcome.value}: {result.message}'
        self._set_condition(job, now, JobReason.FAILED_EVICT, message, events.WARNING)
        return delay.total_seconds()

    def _set_condition(
        self, job: PodMigrationJob, now: datetime, reason: JobReason, message: str, kind: str
    ) -> None:
        wanted = Condition(
            type=ConditionType.EVICTION, status="False", reason=reason, message=message
        )
        status, changed = jobs.with_condition(job.status, wanted, now)
        if changed and self._writer.status(job, status) is not None:
            self._writer.event(job, kind, reason, message)

    def _complete(self, job: PodMigrationJob, now: datetime) -> None:
        key = jobs.pod_key(job)
        done = Condition(
            type=ConditionType.EVICTION, status="True", reason=JobReason.EVICT_COMPLETE
        )
        status, _ = jobs.with_condition(job.status, done, now)
        message = f'Pod "{key}" has been evicted'
        status = jobs.with_phase(
            status, Phase.SUCCEEDED, message=message, status_text=jobs.STATUS_COMPLETE
        )
        if self._writer.status(job, status) is not None:
            self._writer.event(job, events.NORMAL, JobReason.EVICT_COMPLETE, message)
            log.info("PodMigrationJob %s succeeded: %s", job.metadata.name, message)

    def _finish(self, job: PodMigrationJob, reason: JobReason, message: str) -> None:
        status = jobs.with_phase(job.status, Phase.FAILED, reason=reason, message=message)
        if self._writer.status(job, status) is not None:
            self._writer.event(job, events.WARNING, reason, message)
            log.info("PodMigrationJob %s failed (%s): %s", job.metadata.name, reason, message)

    # -- Pending jobs -----------------------------------------------------------------

    def _arbitrate(
        self, pending: list[PodMigrationJob], everything: list[PodMigrationJob], now: datetime
    ) -> float:
        tally = Tally(
            [
                self.migration_of(j)
                for j in everything
                if jobs.phase(j) is Phase.RUNNING and self.alive(j, now)
            ]
        )
        candidates = []
        for job in pending:
            key = jobs.pod_key(job)
            pod = self._caches.pod(key)
            ref = job.spec.pod_ref
            if pod is None or (ref.uid and pod.uid != ref.uid):
                if self._writer.pod_gone(key, ref.uid):
                    self._finish(
                        job, JobReason.MISSING_POD, f'Abort job caused by missing Pod "{key}"'
                    )
                continue
            found = workloads.resolve(pod, self._caches, self._caches)
            candidates.append(Candidate(job, pod, self.migration_of(job), found))
        retry = self.args.arbitration_args.interval.total_seconds()
        for candidate in arbitration.ordered(candidates):
            with self._lock:
                verdict = arbitration.judge(
                    candidate.pod,
                    candidate.migration,
                    candidate.workload,
                    checks=self._checks,
                    caps=self.caps,
                    tally=tally,
                    limiters=self._limiters,
                    now=now,
                )
            name = candidate.job.metadata.name
            if verdict.action is Action.FAIL:
                message = (
                    f'Pod "{candidate.pod.key}" is forbidden to migrate because it does not '
                    f"meet the requirements: {verdict.detail}"
                )
                self._finish(candidate.job, JobReason.FORBIDDEN_MIGRATE_POD, message)
            elif verdict.action is Action.WAIT:
                self._wait(candidate.job, verdict.detail)
            elif (admitted := self._admit(candidate, now)) is not None:
                with self._lock:
                    self._limiters.take(verdict.keys, now)
                tally.add(dataclasses.replace(candidate.migration, admitted=True))
                self._waiting.pop(name, None)
                self._progress(admitted, now)
        return retry

    def _wait(self, job: PodMigrationJob, detail: str) -> None:
        """Say why in the job (phase Pending, the message), when that changed."""
        name = job.metadata.name
        if self._waiting.get(name) != detail:
            self._waiting[name] = detail
            log.info("PodMigrationJob %s waits: %s", name, detail)
        message = f"waiting for arbitration: {detail}"
        if job.status.phase is Phase.PENDING and job.status.message == message:
            return
        self._writer.status(job, jobs.with_phase(job.status, Phase.PENDING, message=message))

    def _admit(self, candidate: Candidate, now: datetime) -> PodMigrationJob | None:
        job, pod = candidate.job, candidate.pod
        if not job.spec.pod_ref.uid:  # a job written by hand: pin the pod (Koordinator does)
            job = self._writer.pin_pod(job, pod.uid) or job
            if not job.spec.pod_ref.uid:
                return None
        status = jobs.with_phase(job.status, Phase.RUNNING)
        updated = self._writer.status(job, status)
        if updated is not None:
            log.info(
                "PodMigrationJob %s admitted: migrating pod %s from node %s",
                job.metadata.name,
                pod.key,
                pod.node_name,
            )
        return updated

    # -- housekeeping -----------------------------------------------------------------

    def _scavenge(self, everything: list[PodMigrationJob], now: datetime) -> list[PodMigrationJob]:
        kept = []
        for job in everything:
            after = jobs.scavenge_after(job)
            if after is None or now < after:
                kept.append(job)
                continue
            if not self._writer.delete(job):
                kept.append(job)
                continue
            log.info("scavenged PodMigrationJob %s", job.metadata.name)
        return kept

    def _forget(self, alive: set[str], now: datetime) -> None:
        with self._lock:
            for table in (self.facts, self._retry_at, self._waiting):
                for name in [n for n in table if n not in alive]:
                    del table[name]
            self._retries.keep_only(alive)
            self._limiters.prune(now)
