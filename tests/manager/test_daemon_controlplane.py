"""The manager daemon on the real API server: Lease election, /healthz, /metrics, a
ConfigMap edit reaching the NodeSLOs without anyone calling a pass by hand."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from kube import rest
from manager import daemon
from testbed import localcluster
from tests.builders import make_slo_config_data, strategy_doc
from tests.manager.test_reconcile_controlplane import CM_NAME, NODESLOS, eventually

pytestmark = pytest.mark.controlplane


@pytest.fixture
def node(kube: rest.Rest) -> Iterator[tuple[str, str]]:
    tag = uuid.uuid4().hex[:8]
    name = f"mgrd-{tag}"
    localcluster.register_node(kube, name, labels={"nodeqos-test": tag})
    yield name, tag
    for path in (f"/api/v1/nodes/{name}", f"{NODESLOS}/{name}"):
        with contextlib.suppress(rest.ApiError):
            kube.delete(path)


def start(kube: rest.Rest, namespace: str, tag: str) -> tuple[daemon.Daemon, threading.Thread]:
    options = daemon.Options(
        config_namespace=namespace,
        metrics_addr="127.0.0.1:0",
        lease_namespace=namespace,
        lease_duration=4.0,
        renew_deadline=3.0,
        retry_period=0.5,
        node_selector=f"nodeqos-test={tag}",
        manage_nodemetrics=False,
    )
    running = daemon.build(options, CollectorRegistry(), client=kube)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    eventually(lambda: running.server is not None, "the endpoint to open")
    return running, thread


def get(running: daemon.Daemon, path: str) -> tuple[int, bytes]:
    assert running.server is not None
    host, port = running.server.address
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=5) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _healthy(running: daemon.Daemon) -> tuple[int, bytes] | None:
    found = get(running, "/healthz")
    return found if found[0] == 200 else None


def exists(kube: rest.Rest, path: str) -> bool:
    try:
        kube.get(path)
    except rest.ApiError as err:
        assert err.not_found, err
        return False
    return True


def test_leader_renders_and_follows_configmap_edits(
    kube: rest.Rest, namespace: str, node: tuple[str, str]
) -> None:
    """Elected, healthy, the NodeSLO rendered, and a threshold edit reaches it."""
    name, tag = node
    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    doc = strategy_doc({"enable": True, "cpuSuppressThresholdPercent": 60})
    kube.create(
        cms,
        {
            "metadata": {"name": CM_NAME},
            "data": make_slo_config_data(resource_threshold_config=doc),
        },
    )
    running, thread = start(kube, namespace, tag)
    try:
        eventually(lambda: running.is_leader, "leadership")

        def threshold() -> int | None:
            try:
                slo = kube.get(f"{NODESLOS}/{name}")
            except rest.ApiError:
                return None
            return int(slo["spec"]["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"])

        eventually(lambda: threshold() == 60, "the rendered NodeSLO")
        # ready once every informer synced: the NodeSLO can be rendered before the last
        # (the profile controller's) has, which a loaded machine showed as one 503
        _, body = eventually(lambda: _healthy(running), "/healthz answering 200")
        assert json.loads(body)["components"]["leader"]["detail"].startswith("leader")
        doc = strategy_doc({"enable": True, "cpuSuppressThresholdPercent": 45})
        current = kube.get(f"{cms}/{CM_NAME}")
        current["data"] = make_slo_config_data(resource_threshold_config=doc)
        kube.replace(f"{cms}/{CM_NAME}", current)
        eventually(lambda: threshold() == 45, "the edited threshold on the NodeSLO")
        _, metrics = get(running, "/metrics")
        assert b"nodeqos_manager_leader 1.0" in metrics
        assert b'nodeqos_manager_writes_total{kind="nodeslo",verb="create"} 1.0' in metrics
    finally:
        running.stop()
        thread.join(15)
    assert not thread.is_alive()
    lease = kube.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/nodeqos-manager")
    assert not lease["spec"].get("holderIdentity")  # released on the way out


def test_two_replicas_one_leader_the_follower_writes_nothing(
    kube: rest.Rest, namespace: str, node: tuple[str, str]
) -> None:
    """Two daemons on one Lease: one leads and writes, the other stays healthy and idle."""
    name, tag = node
    first, first_thread = start(kube, namespace, tag)
    second, second_thread = start(kube, namespace, tag)
    try:
        eventually(lambda: first.is_leader or second.is_leader, "a leader")
        eventually(lambda: exists(kube, f"{NODESLOS}/{name}"), "the NodeSLO")
        leader, follower = (first, second) if first.is_leader else (second, first)
        eventually(lambda: get(follower, "/healthz")[0] == 200, "a healthy follower")
        assert not follower.is_leader
        assert follower.reconciler.writes == 0
        assert leader.reconciler.writes >= 1
    finally:
        for running, thread in ((first, first_thread), (second, second_thread)):
            running.stop()
            thread.join(15)


def test_a_threshold_edit_reaches_every_agents_informer(
    kube: rest.Rest, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three nodes, each with the agent's own states informer: an edit of the cluster's BE
    CPU suppress threshold reaches all three through the running daemon; the delay is printed."""
    from agent import health, states
    from cgroups import Driver

    tag = uuid.uuid4().hex[:8]
    names = [f"mgre-{tag}-{i}" for i in range(3)]
    for name in names:
        localcluster.register_node(kube, name, labels={"nodeqos-test": tag})
    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    doc = strategy_doc({"enable": True, "cpuSuppressThresholdPercent": 60})
    kube.create(
        cms,
        {
            "metadata": {"name": CM_NAME},
            "data": make_slo_config_data(resource_threshold_config=doc),
        },
    )
    agents = [states.States(kube, n, Driver.SYSTEMD, health.Readiness()) for n in names]
    running, thread = start(kube, namespace, tag)
    try:
        for agent in agents:
            agent.start()

        def thresholds() -> list[int | None]:
            return [a.node_slo().thresholds.cpu_suppress_threshold_percent for a in agents]

        eventually(lambda: thresholds() == [60, 60, 60], "every agent on 60")
        current = kube.get(f"{cms}/{CM_NAME}")
        doc = strategy_doc({"enable": True, "cpuSuppressThresholdPercent": 45})
        current["data"] = make_slo_config_data(resource_threshold_config=doc)
        edited = time.monotonic()
        kube.replace(f"{cms}/{CM_NAME}", current)
        eventually(lambda: thresholds() == [45, 45, 45], "every agent on 45")
        delay = time.monotonic() - edited
        with capsys.disabled():
            print(f"\nConfigMap edit -> 3 agents' NodeSLO informers: {delay:.2f}s")
    finally:
        for agent in agents:
            agent.stop()
        running.stop()
        thread.join(15)
        for name in names:
            for path in (f"/api/v1/nodes/{name}", f"{NODESLOS}/{name}"):
                with contextlib.suppress(rest.ApiError):
                    kube.delete(path)
