"""Shared set-up for the MigrationController tests against the real control plane (no tests).

Only etcd and kube-apiserver run: the test plays the ReplicaSet controller
(ReplicaSet objects with `spec.replicas`, pods with controller references to
them, replacements when asked), the kubelet (`mark_running`, finishing
terminating pods) and the scheduler (pods are created bound). Nodes are named
after the test's namespace and carry a label the configuration's nodeSelector
picks; every PodMigrationJob pointing into the namespace is deleted at the end,
so tests sharing the control plane never see each other's jobs.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry

from descheduler import config, framework, plugins
from descheduler.config import ExtensionPoint, PluginArgs
from descheduler.framework import Handle, Snapshot
from descheduler.plugins.migrationcontroller import MigrationController
from kube import cache, events, rest
from testbed import localcluster
from tests.descheduler import fakes
from tests.waiting import eventually

LABEL = "nodeqos-test"
JOBS = cache.PODMIGRATIONJOBS.path()


class RecordingRest(rest.Rest):
    """A Rest client that records every write (anything but GET) it sends."""

    def __init__(self, base: rest.Rest) -> None:
        super().__init__(base.client, qps=0)
        self.writes: list[tuple[str, str]] = []

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        if method != "GET":
            self.writes.append((method, path))
        return super().request(method, path, **kwargs)


class Clock:
    """An injected clock: real time plus an offset the test moves."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, **delta: float) -> None:
        self.offset += timedelta(**delta)


@dataclass
class Cluster:
    kube: rest.Rest
    namespace: str
    nodes: list[str] = field(default_factory=list)
    replica_sets: dict[str, str] = field(default_factory=dict)  # name -> uid
    replacements: list[str] = field(default_factory=list)

    def node(self, suffix: str) -> str:
        return f"{self.namespace}-{suffix}"

    def add_node(self, suffix: str) -> str:
        name = self.node(suffix)
        localcluster.register_node(self.kube, name, labels={LABEL: self.namespace})
        self.kube.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": None}})
        self.nodes.append(name)
        return name

    def replica_set(self, name: str, replicas: int) -> str:
        """A ReplicaSet object expecting `replicas` (no controller acts on it)."""
        body = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
            },
        }
        created = self.kube.create(f"/apis/apps/v1/namespaces/{self.namespace}/replicasets", body)
        self.replica_sets[name] = created["metadata"]["uid"]
        return str(created["metadata"]["uid"])

    def run_pod(
        self,
        name: str,
        node: str,
        workload: str,
        *,
        ready: bool = True,
        labels: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        body = {
            "metadata": {
                "name": name,
                "labels": {"app": workload, **(labels or {})},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": workload,
                        "uid": self.replica_sets[workload],
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "nodeName": self.node(node),
                "containers": [
                    {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
                ],
            },
        }
        created = self.kube.create(f"/api/v1/namespaces/{self.namespace}/pods", body)
        return localcluster.mark_running(self.kube, created, ready=ready)

    def workload(self, name: str, replicas: int, layout: Mapping[str, int]) -> list[str]:
        """A ReplicaSet and its pods, `layout` node suffix -> count; the pod names."""
        self.replica_set(name, replicas)
        names = []
        for node, count in layout.items():
            for _ in range(count):
                pod = f"{name}-{len(names)}"
                self.run_pod(pod, node, name)
                names.append(pod)
        return names

    def replenish(self, workload: str, node: str) -> list[str]:
        """Play the ReplicaSet controller: Ready replacements on `node` up to spec.replicas."""
        path = f"/apis/apps/v1/namespaces/{self.namespace}/replicasets/{workload}"
        replicas = int(self.kube.get(path)["spec"]["replicas"])
        uid = self.replica_sets[workload]
        pods = self.kube.get(f"/api/v1/namespaces/{self.namespace}/pods")["items"]
        have = [
            p
            for p in pods
            if any(o["uid"] == uid for o in p["metadata"].get("ownerReferences") or ())
            and not p["metadata"].get("deletionTimestamp")
        ]
        made = []
        for _ in range(replicas - len(have)):
            name = f"{workload}-r{len(self.replacements)}"
            self.replacements.append(name)
            self.run_pod(name, node, workload)
            made.append(name)
        return made

    def pod(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.kube.get(f"/api/v1/namespaces/{self.namespace}/pods/{name}"))
        except rest.ApiError as err:
            if err.not_found:
                return None
            raise

    def job(
        self,
        pod: str,
        *,
        ttl: str | None = "5m",
        created_by: str | None = None,
        mode: str = "EvictDirectly",
    ) -> str:
        """A PodMigrationJob written by hand (as `kubectl create` would); its name."""
        name = f"{self.namespace}-{pod}"
        spec: dict[str, Any] = {"mode": mode, "podRef": {"namespace": self.namespace, "name": pod}}
        if ttl is not None:
            spec["ttl"] = ttl
        metadata: dict[str, Any] = {"name": name}
        if created_by is not None:
            metadata["annotations"] = {"koordinator.sh/job-created-by": created_by}
        self.kube.create(
            JOBS,
            {
                "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                "kind": "PodMigrationJob",
                "metadata": metadata,
                "spec": spec,
            },
        )
        return name

    def jobs(self) -> list[dict[str, Any]]:
        items = self.kube.get(JOBS)["items"]
        return [j for j in items if j["spec"]["podRef"].get("namespace") == self.namespace]

    def phases(self) -> dict[str, str]:
        """Pod name -> the phase of its job ("" while nobody wrote one)."""
        return {
            j["spec"]["podRef"]["name"]: (j.get("status") or {}).get("phase", "")
            for j in self.jobs()
        }

    def count(self, phase: str) -> int:
        return sum(1 for p in self.phases().values() if p == phase)

    def events(self, namespace: str | None = None) -> list[dict[str, Any]]:
        ns = namespace or self.namespace
        return list(self.kube.get(f"/api/v1/namespaces/{ns}/events")["items"])

    def job_events(self, job: str) -> list[tuple[str, str, str]]:
        """(type, reason, message) of the Events on a job (cluster-scoped: in "default")."""
        return [
            (e["type"], e["reason"], e["message"])
            for e in self.events("default")
            if e["involvedObject"]["name"] == job
            and e["involvedObject"]["kind"] == "PodMigrationJob"
        ]

    def finish_terminating(self) -> list[str]:
        return localcluster.finish_terminating(self.kube, self.namespace)

    def cleanup(self) -> None:
        for job in self.jobs():
            try:
                self.kube.delete(cache.PODMIGRATIONJOBS.path(job["metadata"]["name"]))
            except rest.ApiError as err:
                if not err.not_found:
                    raise
        for node in self.nodes:
            self.kube.delete(f"/api/v1/nodes/{node}")


class EvictEverything:
    """Test balance plugin: asks to evict every evictable pod of every node, in name order."""

    name = "EvictEverything"

    def __init__(self, args: PluginArgs, handle: Handle) -> None:
        self.handle = handle

    def balance(self, snapshot: Snapshot) -> None:
        evictor = self.handle.evictor
        for node in snapshot.nodes:
            for pod in evictor.evictable(snapshot.pods_on(node.name), plugin=self.name):
                evictor.evict(pod, plugin=self.name, reason=f"{node.name} is hot")


def registry() -> framework.Registry:
    found = plugins.registry()
    found.register(
        EvictEverything.name,
        EvictEverything,
        args=fakes.NoArgs,
        extension_points=frozenset({ExtensionPoint.BALANCE}),
    )
    return found


@dataclass
class Descheduler:
    runner: framework.Runner
    source: framework.InformerSource
    client: RecordingRest
    clock: Clock
    stop: threading.Event

    @property
    def plugin(self) -> MigrationController:
        [(_, found)] = self.runner.profiles[0].controllers
        assert isinstance(found, MigrationController)
        return found

    def start(self) -> Descheduler:
        self.runner.start_controllers(self.stop)
        eventually(lambda: self.plugin.caches is not None and self.plugin.caches.synced, "sync")
        return self

    def shut(self) -> None:
        self.stop.set()
        self.source.stop()


def configuration(
    namespace: str, args: Mapping[str, Any], *, balance: Sequence[str] = (), dry_run: bool = False
) -> dict[str, Any]:
    """A Koordinator configuration: MigrationController at filter and evict, nothing else."""
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerConfiguration",
        "dryRun": dry_run,
        "nodeSelector": f"{LABEL}={namespace}",
        "profiles": [
            {
                "name": "p1",
                "plugins": {
                    "balance": {"enabled": [{"name": b} for b in balance]},
                    "filter": {
                        "disabled": [{"name": "*"}],
                        "enabled": [{"name": "MigrationController"}],
                    },
                    "preEvictionFilter": {"disabled": [{"name": "*"}]},
                    "evict": {
                        "disabled": [{"name": "*"}],
                        "enabled": [{"name": "MigrationController"}],
                    },
                },
                "pluginConfig": [
                    {
                        "name": "MigrationController",
                        "args": {"defaultJobMode": "EvictDirectly", **args},
                    }
                ],
            }
        ],
    }


def build(
    kube: rest.Rest,
    namespace: str,
    args: Mapping[str, Any],
    *,
    balance: Sequence[str] = (),
    dry_run: bool = False,
    clock: Clock | None = None,
) -> Descheduler:
    client = RecordingRest(kube)
    found = registry()
    cfg = config.decode_configuration(
        configuration(namespace, args, balance=balance, dry_run=dry_run), plugins=found.catalog()
    )
    source = framework.InformerSource(client, node_metrics=False).start()
    assert source.wait_synced(15)
    clock = clock or Clock()
    recorder = events.Recorder(client, "nodeqos-descheduler")
    runner = framework.Runner.from_config(
        cfg,
        found,
        source=source,
        backend=fakes.FakeBackend(),
        metrics=framework.Metrics(CollectorRegistry()),
        clock=clock,
        client=client,
        recorder=recorder,
    )
    return Descheduler(runner, source, client, clock, threading.Event())
