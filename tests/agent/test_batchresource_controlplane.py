"""BatchResource driven by the agent's real states informer: a pod event sets the cgroups at once."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from agent import health, states
from cgroups import CgroupVersion, Driver, QoSLevel
from kube import rest
from metriccache import MetricCache, kinds
from qosmanager import Evictor, Handle, QoSMetrics, ResourceExecutor
from qosmanager.plugins.batchresource import BatchResource
from testbed import localcluster
from tests.agent.clusterkit import cleanup_cluster_objects
from tests.cgroupfs_builder import fake_container, fake_pod, write_pod_tree
from tests.qosmanager.builders import FakeEvictionAPI

pytestmark = pytest.mark.controlplane

GI = 1 << 30


@pytest.fixture
def node_name(kube: rest.Rest) -> Iterator[str]:
    name = f"br-{uuid.uuid4().hex[:8]}"
    localcluster.register_node(kube, name, cpu="8")
    yield name
    cleanup_cluster_objects(kube, name)


def test_new_container_gets_its_batch_cgroups_from_the_pod_event(
    kube: rest.Rest, namespace: str, node_name: str, tmp_path: Path
) -> None:
    """Interval one hour: the container's cpu.max/memory.max follow its Running event within seconds."""
    informer = states.States(kube, node_name, Driver.SYSTEMD, health.Readiness())
    informer.start()
    stop = threading.Event()
    cache = MetricCache(kinds.default_registry())
    thread: threading.Thread | None = None
    try:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "batch", "labels": {"koordinator.sh/qosClass": "BE"}},
            "spec": {
                "nodeName": node_name,
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {
                            "requests": {"kubernetes.io/batch-cpu": "500"},
                            "limits": {
                                "kubernetes.io/batch-cpu": "1500",
                                "kubernetes.io/batch-memory": "1Gi",
                            },
                        },
                    }
                ],
            },
        }
        pod = kube.create(f"/api/v1/namespaces/{namespace}/pods", body)
        uid = pod["metadata"]["uid"]
        cid = f"{uid.replace('-', '')[:24]}{0:040d}"  # what localcluster.mark_running reports
        fake = fake_pod(uid, qos=QoSLevel.BESTEFFORT, containers=[fake_container(cid)])
        tree = write_pod_tree(tmp_path, CgroupVersion.V2, Driver.SYSTEMD, [fake])
        metrics = QoSMetrics(CollectorRegistry())
        handle = Handle(
            fs=tree.fs,
            executor=ResourceExecutor(tree.fs, metrics=metrics),
            metrics=metrics,
            evictor=Evictor(FakeEvictionAPI(), metrics=metrics),
        )
        plugin = BatchResource(handle, interval=3600)
        plugin.setup(kube, cache, informer)
        assert informer.wait_synced(30)
        thread = threading.Thread(target=plugin.run, args=(stop,), daemon=True)
        thread.start()
        cpu_max = tree.fs.path(tree.pod_dir(fake), "cpu.max")
        deadline = time.monotonic() + 30
        while cpu_max.read_text().split()[0] != "150000" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert cpu_max.read_text().split()[0] == "150000"  # the pod, before its container runs
        started = time.monotonic()
        localcluster.mark_running(kube, pod)
        container = tree.container_dir(fake, fake.containers[0])
        memory_max = tree.fs.path(container, "memory.max")
        while memory_max.read_text().strip() != str(GI) and time.monotonic() < started + 30:
            time.sleep(0.01)
        took = time.monotonic() - started
        assert memory_max.read_text().strip() == str(GI)
        assert tree.fs.path(container, "cpu.max").read_text().split()[0] == "150000"
        print(f"container cgroups set {took * 1000:.0f} ms after the Running status was written")
        assert took < 10, f"took {took:.1f}s; the pod event should trigger a round at once"
    finally:
        stop.set()
        if thread is not None:
            thread.join(10)
        informer.stop()
        cache.close()
