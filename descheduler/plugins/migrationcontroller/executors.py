"""How an admitted job removes its pod: `evictionPolicy`, rate-limited by `evictQPS`/`evictBurst`.

- `Eviction`: the Eviction API with a UID precondition (PodDisruptionBudgets hold);
- `Delete`: a DELETE with a UID precondition (budgets do not);
- `SoftEviction`: nothing is removed; the pod gets Koordinator's
  `scheduling.koordinator.sh/soft-eviction` annotation (timestamp, deleteOptions,
  initiator, reason) for a component of the user's to act on, and the job
  waits for the pod to go (or times out).

A `koordinator.sh/evict-policy` label on the pod, else on the job, picks another
policy for that one eviction (Koordinator's interpreter). The job's
`deleteOptions.gracePeriodSeconds` is passed on. A successful eviction gets a
`Descheduled` Event on the pod, like every other nodeqos eviction.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta

from descheduler import evictions
from descheduler.plugins.migrationcontroller import jobs
from descheduler.plugins.migrationcontroller.args import EvictionPolicy
from descheduler.plugins.migrationcontroller.limits import Bucket
from kube import events, eviction, objects, rest
from kube.migration import PodMigrationJob


class Executor:
    """Carries out evictions for jobs, at most `qps` per second (bursts of `burst`)."""

    def __init__(
        self,
        client: rest.Rest,
        recorder: events.Recorder | None,
        *,
        policy: EvictionPolicy,
        qps: float,
        burst: int,
        clock: Callable[[], datetime],
    ) -> None:
        self._client = client
        self._recorder = recorder
        self._policy = policy
        self._clock = clock
        self._bucket = Bucket(qps, burst, clock())

    def wait(self) -> timedelta:
        """Zero when an eviction may go now, else how long until one may."""
        return self._bucket.wait(self._clock())

    def policy_for(self, job: PodMigrationJob, pod: objects.Pod) -> EvictionPolicy:
        for labels in (pod.labels, job.metadata.labels):
            chosen = labels.get(jobs.LABEL_EVICT_POLICY, "")
            if chosen in EvictionPolicy.__members__.values():
                return EvictionPolicy(chosen)
        return self._policy

    def evict(self, job: PodMigrationJob, pod: objects.Pod) -> eviction.Result:
        """Remove (or mark) the job's pod; takes a token (check `wait` first)."""
        self._bucket.take(self._clock())
        policy = self.policy_for(job, pod)
        options = job.spec.delete_options or {}
        grace = options.get("gracePeriodSeconds")
        grace = grace if isinstance(grace, int) else None
        if policy is EvictionPolicy.SOFT_EVICTION:
            result = self._soft(job, pod)
        elif policy is EvictionPolicy.DELETE:
            result = eviction.delete(
                self._client, pod.namespace, pod.name, uid=pod.uid, grace_period_seconds=grace
            )
        else:
            result = eviction.evict(
                self._client, pod.namespace, pod.name, uid=pod.uid, grace_period_seconds=grace
            )
        if result.ok and self._recorder is not None:
            trigger, reason = jobs.eviction_trigger_and_reason(job)
            message = evictions.event_message(
                pod,
                evictions.EvictOptions(
                    plugin=f"{trigger or 'MigrationController'} (PodMigrationJob "
                    f"{job.metadata.name})",
                    reason=reason,
                ),
            )
            if policy is EvictionPolicy.SOFT_EVICTION:
                message = "soft eviction requested: " + message.removeprefix("pod evicted ")
            ref = events.ObjectRef(kind="Pod", name=pod.name, namespace=pod.namespace, uid=pod.uid)
            self._recorder.event(ref, events.NORMAL, evictions.EVENT_REASON, message)
        return result

    def _soft(self, job: PodMigrationJob, pod: objects.Pod) -> eviction.Result:
        trigger, reason = jobs.eviction_trigger_and_reason(job)
        spec: dict[str, object] = {"timestamp": objects.format_time(self._clock())}
        if job.spec.delete_options:
            spec["deleteOptions"] = dict(job.spec.delete_options)
        if trigger:
            spec["initiator"] = trigger
        spec["reason"] = reason
        patch = {
            "metadata": {
                "uid": pod.uid,  # a namesake created since would fail the patch
                "annotations": {jobs.ANNOTATION_SOFT_EVICTION: json.dumps(spec)},
            }
        }
        path = rest.object_path("", "v1", "pods", pod.name, namespace=pod.namespace)
        try:
            self._client.patch(path, patch)
        except rest.ApiUnavailable as err:
            return eviction.Result(eviction.Outcome.UNAVAILABLE, str(err))
        except rest.ApiError as err:
            if err.not_found:
                return eviction.Result(eviction.Outcome.NOT_FOUND, err.message)
            if err.conflict or err.status == 422:
                return eviction.Result(eviction.Outcome.UID_MISMATCH, err.message)
            if err.status == 403:
                return eviction.Result(eviction.Outcome.FORBIDDEN, err.message)
            return eviction.Result(eviction.Outcome.FAILED, err.message)
        return eviction.Result(eviction.Outcome.EVICTED)
