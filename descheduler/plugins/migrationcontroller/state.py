"""What the MigrationController knows of the cluster: list-watch caches plus its own writes.

`Caches` keeps informers of PodMigrationJobs, pods (indexed by controller UID)
and the workload kinds `workloads` reads (ReplicaSets, Deployments,
StatefulSets, ReplicationControllers). It runs only while the controller does
(on the leader). Every job this process writes is also remembered until the
watch delivers it (`remember`): a decision right after a write must count
that write, not the cache's older copy (Koordinator's assumedCache; the newer
resourceVersion wins).

Events wake the controller (`on_change`): any job event, and events of pods
that an unfinished job points at (an evicted pod going away finishes its job).
Other pod events do not: the arbitration interval covers readiness changes.

`SnapshotPods` serves the same pod questions from a cycle's snapshot, for the
filter when there is no API client (`simulate`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from descheduler.framework import Snapshot
from descheduler.plugins.migrationcontroller import jobs, workloads
from descheduler.plugins.migrationcontroller.workloads import Owner
from kube import cache, objects, rest
from kube.migration import PodMigrationJob

BY_CONTROLLER = "controller"


def _controller_uid(pod: objects.Pod) -> list[str]:
    ref = pod.controller_ref
    return [ref.uid] if ref is not None else []


def _owner_controller_uid(owner: Owner) -> list[str]:
    return [owner.controller.uid] if owner.controller is not None else []


class Caches:
    """Informers of jobs, pods and workloads, and the jobs this process wrote since."""

    def __init__(self, client: rest.Rest, on_change: Callable[[], None]) -> None:
        self._on_change = on_change
        self._lock = threading.Lock()
        # name -> (the newest version this process wrote, whether it deleted it)
        self._written: dict[str, tuple[PodMigrationJob, bool]] = {}
        self._watched: frozenset[str] = frozenset()
        self.jobs_informer: cache.Informer[PodMigrationJob | None] = cache.Informer(
            client,
            cache.PODMIGRATIONJOBS,
            project=jobs.parse,
            on_event=self._job_event,
            name="migrationcontroller-jobs",
        )
        self.pods_informer: cache.Informer[objects.Pod] = cache.Informer(
            client,
            cache.PODS,
            project=objects.Pod.from_api,
            indexers={BY_CONTROLLER: _controller_uid},
            on_event=self._pod_event,
            name="migrationcontroller-pods",
        )
        self.owner_informers: dict[str, cache.Informer[Owner]] = {
            kind: cache.Informer(
                client,
                resource,
                project=Owner.projector(kind),
                indexers={BY_CONTROLLER: _owner_controller_uid},
                name=f"migrationcontroller-{resource.plural}",
            )
            for kind, resource in workloads.RESOURCES.items()
        }

    def _informers(self) -> list[cache.Informer[Any]]:
        return [self.jobs_informer, self.pods_informer, *self.owner_informers.values()]

    # -- running ---------------------------------------------------------------------

    def start(self) -> None:
        for informer in self._informers():
            informer.start()

    def stop(self) -> None:
        for informer in self._informers():
            informer.stop()
        with self._lock:
            self._written.clear()

    @property
    def synced(self) -> bool:
        return all(i.synced for i in self._informers())

    def wait_synced(self, timeout: float) -> bool:
        """Block until every cache has listed once, `timeout` seconds at most in all."""
        deadline = time.monotonic() + timeout
        return all(i.wait_synced(max(0.0, deadline - time.monotonic())) for i in self._informers())

    def unsynced(self) -> str:
        """The caches still waiting for their first list, with their last error."""
        return "; ".join(
            f"{i.name}" + (f" ({i.last_error})" if i.last_error else "")
            for i in self._informers()
            if not i.synced
        )

    def _job_event(self, kind: str, old: Any, new: Any) -> None:
        self._on_change()

    def _pod_event(self, kind: str, old: objects.Pod | None, new: objects.Pod | None) -> None:
        pod = new or old
        if pod is not None and pod.key in self._watched:
            self._on_change()

    def watch_pods(self, keys: frozenset[str]) -> None:
        """Wake the controller when any of these pods (namespace/name) changes."""
        self._watched = keys

    # -- jobs ------------------------------------------------------------------------

    def remember(self, job: PodMigrationJob, *, deleted: bool = False) -> None:
        """A job this process just wrote (or deleted), until the watch catches up."""
        with self._lock:
            self._written[job.metadata.name] = (job, deleted)

    def jobs(self) -> list[PodMigrationJob]:
        """Every job, each in its newest known version, by name."""
        cached: dict[str, PodMigrationJob] = {}
        for job in self.jobs_informer.items():
            if job is not None:
                cached[job.metadata.name] = job
        try:  # how far the watch has got (etcd revisions, compared as numbers like Koordinator)
            watched = int(self.jobs_informer.resource_version)
        except ValueError:
            watched = -1
        with self._lock:
            for name, (written, deleted) in list(self._written.items()):
                seen = cached.get(name)
                if deleted:
                    if seen is None or seen.metadata.uid != written.metadata.uid:
                        del self._written[name]  # the watch saw it go (a namesake may be new)
                    else:
                        del cached[name]
                    continue
                version = jobs.resource_version(written)
                if (seen is not None and jobs.resource_version(seen) >= version) or (
                    seen is None and watched >= version
                ):
                    del self._written[name]  # the cache caught up (or saw it deleted since)
                    continue
                cached[name] = written
        return sorted(cached.values(), key=lambda j: j.metadata.name)

    # -- pods and owners (workloads.PodSource, workloads.OwnerSource) -------------------

    def pod(self, key: str) -> objects.Pod | None:
        return self.pods_informer.get(key)

    def pods_of_owner(self, uid: str) -> Sequence[objects.Pod]:
        return sorted(
            self.pods_informer.by_index(BY_CONTROLLER, uid), key=lambda p: (p.namespace, p.name)
        )

    def owner(self, kind: str, namespace: str, name: str) -> Owner | None:
        informer = self.owner_informers.get(kind)
        return None if informer is None else informer.get(f"{namespace}/{name}")

    def replica_sets_of(self, deployment_uid: str) -> Sequence[Owner]:
        return self.owner_informers[workloads.REPLICA_SET].by_index(BY_CONTROLLER, deployment_uid)


class SnapshotPods:
    """Pod questions answered from a cycle's snapshot, evictions of the cycle included."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._by_key: Mapping[str, objects.Pod] | None = None

    def pod(self, key: str) -> objects.Pod | None:
        if self._by_key is None:
            everything = [*self._snapshot.pods(), *self._snapshot.evicted]
            self._by_key = {p.key: p for p in everything}
        return self._by_key.get(key)

    def pods_of_owner(self, uid: str) -> Sequence[objects.Pod]:
        gone = [
            p
            for p in self._snapshot.evicted
            if p.controller_ref is not None and p.controller_ref.uid == uid
        ]
        present = [
            p
            for p in self._snapshot.pods_of_owner(uid)
            if p.controller_ref is not None and p.controller_ref.uid == uid
        ]
        return sorted([*present, *gone], key=lambda p: (p.namespace, p.name))
