"""Pods from the API server feed the collectors: cgroups from UID, QoS class and container IDs."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from agent import assembly, config, discovery, features
from cgroups import CgroupVersion, Driver, QoSLevel
from kube import classify
from metriccache import kinds
from qosmanager import states as qstates
from tests.agent.builders import FakeClock
from tests.cgroupfs_builder import (
    FakeCgroupTree,
    FakePod,
    fake_container,
    fake_pod,
    write_meminfo,
    write_pod_tree,
    write_proc_stat,
)
from tests.qosmanager.builders import BE, LS, LSR, make_pod

_LEVEL = {BE: QoSLevel.BESTEFFORT, LS: QoSLevel.BURSTABLE, LSR: QoSLevel.GUARANTEED}


class FakeLister:
    """The states informer's pods, set by the test (`discovery.PodLister`)."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.raw: dict[str, dict[str, Any]] = {}
        self.pods_version = 0

    def put(self, obj: dict[str, Any]) -> None:
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.pods_version + 1)
        self.raw[obj["metadata"]["uid"]] = obj
        self.pods_version += 1

    def pods(self) -> Sequence[qstates.PodMeta]:
        return [qstates.PodMeta.from_api(o, self.driver) for o in self.raw.values()]


def cgroup_pod(obj: dict[str, Any], qos: str, **values: Any) -> FakePod:
    """The fake cgroups of a `make_pod` pod: its UID, QoS level and container IDs."""
    uid = obj["metadata"]["uid"]
    ids = [s["containerID"].split("://")[1] for s in obj["status"]["containerStatuses"]]
    return fake_pod(
        uid, qos=_LEVEL[qos], containers=[fake_container(i, **values) for i in ids], **values
    )


class Node:
    """A fake host whose pods come from a `FakeLister`, collected by the real collectors."""

    def __init__(self, tmp_path: Path, version: CgroupVersion, driver: Driver) -> None:
        self.tree: FakeCgroupTree = write_pod_tree(tmp_path / "cgroup", version, driver)
        proc = tmp_path / "proc"
        write_proc_stat(proc, user=100, system=50, idle=1000)
        write_meminfo(proc, total_kb=16 << 20, available_kb=12 << 20)
        self.lister = FakeLister(driver)
        self.source = discovery.ClusterDiscovery(self.tree.fs, self.lister, retry_every=5)
        self.clock = FakeClock()
        self.registry = CollectorRegistry()
        cfg = config.AgentConfig(
            node_name="node-a",
            cgroup_root=self.tree.root,
            proc_root=proc,
            metric_cache_path=tmp_path / "cache.db",
            metrics_addr=None,
            feature_gates=features.defaults(),
        )
        self.agent = assembly.assemble(
            cfg, self.registry, self.clock, flush_interval=None, source=self.source
        )

    def round(self) -> None:
        self.agent.collection.run_round()
        self.clock.advance(1.0)

    def last(self, kind: kinds.MetricKind, **labels: str) -> float | None:
        now = self.clock.time() - 1.0
        agg = self.agent.cache.aggregate(kind, labels, now, now)
        return None if agg is None else agg.last

    def gone_errors(self) -> float:
        value = self.registry.get_sample_value(
            "nodeqos_agent_collector_errors_total", {"collector": "pods", "reason": "gone"}
        )
        return value or 0.0


@pytest.fixture
def node(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Node]:
    version, driver = getattr(request, "param", (CgroupVersion.V2, Driver.SYSTEMD))
    made = Node(tmp_path, version, driver)
    yield made
    made.agent.close()


@pytest.mark.parametrize(
    "node",
    [
        pytest.param((CgroupVersion.V2, Driver.SYSTEMD), id="v2-systemd"),
        pytest.param((CgroupVersion.V1, Driver.CGROUPFS), id="v1-cgroupfs"),
    ],
    indirect=True,
)
def test_api_pods_are_read_from_their_cgroups(node: Node) -> None:
    """Each pod's and container's CPU and memory are collected under its UID and status ID."""
    web, batch = make_pod("web", qos=LSR), make_pod("batch", qos=BE, containers=2)
    for obj, qos in ((web, LSR), (batch, BE)):
        node.lister.put(obj)
        node.tree.add_pod(cgroup_pod(obj, qos, active_anon=64 << 20))
    node.round()
    for obj, qos in ((web, LSR), (batch, BE)):
        pod = cgroup_pod(obj, qos)
        node.tree.advance_cpu(node.tree.pod_dir(pod), 500_000_000)
        for container in pod.containers:
            node.tree.advance_cpu(node.tree.container_dir(pod, container), 250_000_000)
    node.round()
    for obj in (web, batch):
        uid = obj["metadata"]["uid"]
        assert node.last(kinds.POD_CPU_USAGE, pod_uid=uid) == pytest.approx(0.5)
        assert node.last(kinds.POD_MEMORY_USAGE, pod_uid=uid) == 64 << 20
        for status in obj["status"]["containerStatuses"]:
            cid = status["containerID"].split("://")[1]
            labels = {"pod_uid": uid, "container_id": cid}
            assert node.last(kinds.CONTAINER_CPU_USAGE, **labels) == pytest.approx(0.25)
    assert node.gone_errors() == 0


def test_a_pod_without_cgroup_is_left_out_until_it_changes(node: Node) -> None:
    """A pending pod costs one failed read, not one per round; its update brings it back."""
    pending = make_pod("starting", qos=LS, phase="Pending")
    node.lister.put(pending)
    for _ in range(3):
        node.round()
    assert node.gone_errors() == 1
    node.tree.add_pod(cgroup_pod(pending, LS, active_anon=1 << 20))
    node.round()
    assert node.last(kinds.POD_MEMORY_USAGE, pod_uid=pending["metadata"]["uid"]) is None
    node.lister.put(pending)  # kubelet reports it running: a new resourceVersion
    node.round()
    assert node.last(kinds.POD_MEMORY_USAGE, pod_uid=pending["metadata"]["uid"]) == 1 << 20


def test_a_forgotten_pod_is_retried_periodically(node: Node) -> None:
    """Without any change in the API, the pod is tried again every `retry_every` rounds."""
    late = make_pod("late", qos=LS)
    node.lister.put(late)
    node.round()  # round 0: missing, forgotten
    node.tree.add_pod(cgroup_pod(late, LS, active_anon=2 << 20))
    for _ in range(4):  # rounds 1-4: still forgotten
        node.round()
    assert node.last(kinds.POD_MEMORY_USAGE, pod_uid=late["metadata"]["uid"]) is None
    node.round()  # round 5: the retry
    assert node.last(kinds.POD_MEMORY_USAGE, pod_uid=late["metadata"]["uid"]) == 2 << 20
    assert node.gone_errors() == 1


def test_finished_pods_and_stopped_containers_are_not_read(node: Node) -> None:
    """Succeeded/Failed pods have no cgroups; a container not running has none either."""
    done = make_pod("done", qos=LS, phase="Succeeded")
    crashed = make_pod("crashed", qos=LS)
    crashed["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "CrashLoop"}}
    node.lister.put(done)
    node.lister.put(crashed)
    node.tree.add_pod(fake_pod(crashed["metadata"]["uid"], qos=QoSLevel.BURSTABLE))
    targets = node.source.targets()
    assert [t.uid for t in targets] == [crashed["metadata"]["uid"]]
    assert targets[0].containers == ()


def test_targets_are_reused_until_the_pod_changes(node: Node) -> None:
    """Paths are resolved once per pod: an unchanged pod keeps its target object."""
    web = make_pod("web", qos=LS)
    node.lister.put(web)
    first = node.source.targets()[0]
    node.lister.put(make_pod("other", qos=BE))  # another pod changes the version
    again = {t.uid: t for t in node.source.targets()}
    assert again[web["metadata"]["uid"]] is first


@pytest.mark.parametrize(
    ("pod", "priority", "qos"),
    [
        pytest.param(make_pod("g", qos=LSR), "koord-prod", "LSR", id="guaranteed"),
        pytest.param(make_pod("b", qos=LS), "koord-prod", "LS", id="burstable"),
        pytest.param(make_pod("be", qos=BE), "koord-batch", "BE", id="besteffort"),
        pytest.param(make_pod("mid", qos=LS, priority=7500), "koord-mid", "LS", id="band"),
        pytest.param(
            make_pod(
                "lab",
                qos=LS,
                labels={
                    "koordinator.sh/priority-class": "koord-free",
                    "koordinator.sh/qosClass": "BE",
                },
            ),
            "koord-free",
            "BE",
            id="labels",
        ),
        pytest.param(
            make_pod("sys", qos=LS, labels={"koordinator.sh/qosClass": "SYSTEM"}),
            "koord-prod",
            "SYSTEM",
            id="system",
        ),
    ],
)
def test_pod_metas_carry_koordinator_classes(
    node: Node, pod: dict[str, Any], priority: str, qos: str
) -> None:
    """podsMetric priority/qos: labels, else the spec.priority band, else the QoS default."""
    node.lister.put(pod)
    (meta,) = node.source.pod_metas().values()
    assert (meta.name, meta.namespace) == (pod["metadata"]["name"], "default")
    assert meta.priority is classify.PriorityClass(priority)
    assert meta.qos is classify.KoordQOS(qos)
