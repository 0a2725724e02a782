"""The controller's API calls: job status, pod pins, deletions, Events, one pod lookup.

Every job write carries the resourceVersion the decision was made on, so a
job changed meanwhile (by a user, by another instance) is skipped with a 409
and decided again on the next pass. What is written is remembered in the
caches (`state.Caches.remember`) until the watch delivers it. Failures are
logged and reported as None/False, never raised: the pass carries on with the
other jobs.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from descheduler.plugins.migrationcontroller import jobs
from descheduler.plugins.migrationcontroller.state import Caches
from kube import cache, events, migration, rest
from kube.migration import PodMigrationJob

log = logging.getLogger("descheduler.migrationcontroller")


class Writer:
    """Writes for one controller; `recorder` None writes no Events."""

    def __init__(self, client: rest.Rest, recorder: events.Recorder | None, caches: Caches) -> None:
        self._client = client
        self._recorder = recorder
        self._caches = caches

    def status(
        self, job: PodMigrationJob, status: migration.PodMigrationJobStatus
    ) -> PodMigrationJob | None:
        """PUT /status; the job as written, or None (a conflict: a newer version is coming)."""
        body = dataclasses.replace(job, status=status).to_api()
        path = cache.PODMIGRATIONJOBS.path(job.metadata.name, subresource="status")
        try:
            raw = self._client.replace(path, body)
        except (rest.ApiError, rest.ApiUnavailable) as err:
            log.info("PodMigrationJob %s: status not written: %s", job.metadata.name, err)
            return None
        return self._remembered(raw)

    def pin_pod(self, job: PodMigrationJob, uid: str) -> PodMigrationJob | None:
        """Record the pod's UID in a hand-written job, so a namesake is never evicted for it."""
        patch = {
            "metadata": {"resourceVersion": job.metadata.resource_version},
            "spec": {"podRef": {"uid": uid}},
        }
        try:
            raw = self._client.patch(cache.PODMIGRATIONJOBS.path(job.metadata.name), patch)
        except (rest.ApiError, rest.ApiUnavailable) as err:
            log.info("PodMigrationJob %s: could not pin its pod: %s", job.metadata.name, err)
            return None
        return self._remembered(raw)

    def delete(self, job: PodMigrationJob) -> bool:
        """Delete the job (this very one: UID precondition); True when it is gone."""
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if job.metadata.uid:
            options["preconditions"] = {"uid": job.metadata.uid}
        try:
            self._client.delete(cache.PODMIGRATIONJOBS.path(job.metadata.name), options)
        except rest.ApiError as err:
            if not err.not_found:
                log.info("could not delete PodMigrationJob %s: %s", job.metadata.name, err)
                return False
        except rest.ApiUnavailable:
            return False
        self._caches.remember(job, deleted=True)
        return True

    def pod_gone(self, key: str, uid: str) -> bool:
        """Whether the API server agrees the pod is gone (the cache may just lag behind)."""
        namespace, _, name = key.partition("/")
        try:
            found = self._client.get(rest.object_path("", "v1", "pods", name, namespace=namespace))
        except rest.ApiError as err:
            return err.not_found
        except rest.ApiUnavailable:
            return False
        return bool(uid) and (found.get("metadata") or {}).get("uid") != uid

    def event(self, job: PodMigrationJob, kind: str, reason: str, message: str) -> None:
        if self._recorder is None:
            return
        ref = events.ObjectRef(
            kind="PodMigrationJob",
            name=job.metadata.name,
            uid=job.metadata.uid,
            api_version=migration.API_VERSION,
        )
        self._recorder.event(ref, kind, reason, message)

    def _remembered(self, raw: object) -> PodMigrationJob | None:
        updated = jobs.parse(raw) if isinstance(raw, dict) else None
        if updated is not None:
            self._caches.remember(updated)
        return updated
