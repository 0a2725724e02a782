"""The extender served to the real kube-scheduler, with the shipped scheduler configurations.

The real kube-scheduler and kube-controller-manager (the `cluster` fixture), the
extender as a `nodeqos-scheduler-extender` process under its own ServiceAccount
and deploy/ RBAC, Nodes registered without kubelets, and NodeMetrics written as
an agent would (fresh `updateTime`, chosen usage), so each test knows exactly
how hot every node is.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender import local
from kube import cache, rest
from testbed import controlplane, localcluster
from tests.builders import make_nodemetric_dict
from tests.waiting import eventually

pytestmark = pytest.mark.controlplane

REPO = Path(__file__).resolve().parents[2]
SCHEDULER_CONFIGS = REPO / "deploy" / "kube-scheduler"
NAMESPACE = "extender-e2e"
LABEL = {"nodeqos.dev/e2e": "extender"}


@pytest.fixture(scope="module")
def admin(cluster: controlplane.ControlPlane) -> rest.Rest:
    return rest.Rest.from_kubeconfig(cluster.kubeconfig, qps=0)


@pytest.fixture(scope="module")
def extender(
    cluster: controlplane.ControlPlane, admin: rest.Rest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[subprocess.Popen[bytes]]:
    """The extender process with deploy/'s RBAC and ConfigMap args; the scheduler restored after."""
    args = None
    for doc in yaml.safe_load_all((REPO / "deploy" / "scheduler-extender.yaml").read_text()):
        if doc["kind"] in ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"):
            localcluster.apply(admin, doc)
        if doc["kind"] == "ConfigMap":
            args = doc["data"]["loadaware.yaml"]
    assert args is not None
    workdir = tmp_path_factory.mktemp("extender")
    (workdir / "loadaware.yaml").write_text(args)
    identity = cluster.service_account("nodeqos-system", "nodeqos-scheduler-extender", create=False)
    port = controlplane.free_port()
    log = (workdir / "extender.log").open("wb")
    proc = subprocess.Popen(
        local.command(identity.kubeconfig, workdir / "loadaware.yaml", port),
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=REPO,
    )
    proc.port = port  # type: ignore[attr-defined]
    try:
        local.wait_ready(port)
        localcluster.apply(
            admin, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        yield proc
    finally:
        proc.terminate()
        proc.wait(15)
        log.close()
        cluster.start_scheduler(None)
        with contextlib.suppress(rest.ApiError):
            admin.delete(rest.object_path("", "v1", "namespaces", NAMESPACE))
        for node in admin.get("/api/v1/nodes", labelSelector="nodeqos.dev/e2e=extender")["items"]:
            name = node["metadata"]["name"]
            with contextlib.suppress(rest.ApiError):
                admin.delete(rest.object_path("", "v1", "nodes", name))
            with contextlib.suppress(rest.ApiError):
                admin.delete(cache.NODEMETRICS.path(name))


def hot_nodes(admin: rest.Rest, cpu_millis: dict[str, int]) -> None:
    """8-core nodes whose fresh NodeMetric reports the given cpu usage (memory 10%)."""
    for name, millis in cpu_millis.items():
        localcluster.register_node(admin, name, cpu="8", memory="32Gi", labels=LABEL)
        metric = make_nodemetric_dict(
            name,
            node_cpu=f"{millis}m",
            node_memory="3Gi",
            update_time=datetime.now(UTC).replace(microsecond=0),
        )
        path = cache.NODEMETRICS.path(name)
        with contextlib.suppress(rest.ApiError):
            admin.delete(path)
        created = admin.create(cache.NODEMETRICS.path(), {**metric, "status": {}})
        created["status"] = metric["status"]
        admin.replace(path + "/status", created)


def deployment(
    name: str, replicas: int, scheduler: str, selector: dict[str, str]
) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "schedulerName": scheduler,
                    "nodeSelector": selector,
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.local/app:1",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                        }
                    ],
                },
            },
        },
    }


def placements(admin: rest.Rest, app: str) -> list[str]:
    pods = admin.get(f"/api/v1/namespaces/{NAMESPACE}/pods", labelSelector=f"app={app}")["items"]
    return [p["spec"].get("nodeName", "") for p in pods]


def test_a_burst_of_replicas_is_spread_over_the_cool_nodes(
    cluster: controlplane.ControlPlane, admin: rest.Rest, extender: Any
) -> None:
    """Six replicas created at once by the real ReplicaSet controller, placed by the shipped
    second-scheduler profile: none on the hot node, and not all on the coolest one."""
    hot_nodes(admin, {"burst-a": 800, "burst-b": 2400, "burst-c": 2400, "burst-hot": 6000})
    cluster.start_scheduler(
        local.point_scheduler(SCHEDULER_CONFIGS / "second-scheduler.yaml", extender.port)
    )
    localcluster.apply(
        admin, deployment("burst", 6, "nodeqos-load-aware", {"nodeqos.dev/e2e": "extender"})
    )
    placed = eventually(
        lambda: (p := placements(admin, "burst")) and len(p) == 6 and all(p) and p,
        timeout=60,
        what="six bound replicas",
    )
    assert "burst-hot" not in placed, placed  # 75% > 65%: filtered
    assert placed.count("burst-a") <= 4, placed  # the coolest, but not all of the burst
    assert len(set(placed)) >= 2, placed


def test_a_refusal_reaches_the_pods_failedscheduling_event(
    cluster: controlplane.ControlPlane, admin: rest.Rest, extender: Any
) -> None:
    """With the shipped default-profile config, a pod that only fits a hot node stays Pending,
    and its event says why in the extender's words."""
    hot_nodes(admin, {"only-hot": 7000})
    cluster.start_scheduler(
        local.point_scheduler(SCHEDULER_CONFIGS / "extender.yaml", extender.port)
    )
    localcluster.apply(
        admin,
        deployment("stuck", 1, "default-scheduler", {"kubernetes.io/hostname": "only-hot"}),
    )

    def refusal() -> str | None:
        events = admin.get(f"/api/v1/namespaces/{NAMESPACE}/events")["items"]
        for event in events:
            if event.get("reason") == "FailedScheduling" and "only-hot" in event.get("message", ""):
                return str(event["message"])
        return None

    message = eventually(refusal, timeout=60, what="a FailedScheduling event")
    # 7 cores measured + 1 core x 85% estimated, of 8
    assert "node only-hot: cpu usage 98 percent > threshold 65 percent" in message
    assert "MISSING" not in message
    assert placements(admin, "stuck") == [""]


def test_scheduling_goes_on_while_the_extender_is_down(
    cluster: controlplane.ControlPlane, admin: rest.Rest, extender: Any
) -> None:
    """ignorable: true in the shipped config: no extender listening, pods still get placed."""
    hot_nodes(admin, {"lonely": 500})
    cluster.start_scheduler(
        local.point_scheduler(SCHEDULER_CONFIGS / "extender.yaml", controlplane.free_port())
    )
    try:
        localcluster.apply(
            admin,
            deployment("unaware", 1, "default-scheduler", {"kubernetes.io/hostname": "lonely"}),
        )
        assert eventually(
            lambda: all(p := placements(admin, "unaware")) and p, timeout=60, what="a binding"
        ) == ["lonely"]
    finally:
        cluster.start_scheduler(None)
