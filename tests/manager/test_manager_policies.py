"""deploy/manager.yaml on the real API server: the manager's ServiceAccount does its whole
job with the rights it is given, and cannot write NodeMetric status even when a broader
role is bound to it (the ValidatingAdmissionPolicy)."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from kube import cache, events, rest
from manager import reconcile
from manager.telemetry import Metrics
from testbed import controlplane, localcluster
from tests.manager.test_reconcile_controlplane import NODESLOS, eventually

pytestmark = pytest.mark.controlplane

MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "manager.yaml"
NAMESPACE = "nodeqos-system"
STATUS_WRITER = "nodeqos-test-nodemetric-status-writer"


@pytest.fixture(scope="module")
def manager(control_plane: controlplane.ControlPlane, kube: rest.Rest) -> Iterator[rest.Rest]:
    """deploy/manager.yaml applied (all but the Deployment), and a client as its ServiceAccount."""
    for doc in yaml.safe_load_all(MANIFEST.read_text(encoding="utf-8")):
        if doc and doc["kind"] not in ("Deployment", "PodDisruptionBudget"):
            localcluster.apply(kube, doc)
    identity = control_plane.service_account(NAMESPACE, "nodeqos-manager", create=False)
    yield rest.Rest.from_kubeconfig(identity.kubeconfig, qps=0)


@pytest.fixture
def node(kube: rest.Rest) -> Iterator[tuple[str, str]]:
    tag = uuid.uuid4().hex[:8]
    name = f"mgrp-{tag}"
    localcluster.register_node(kube, name, labels={"nodeqos-test": tag})
    yield name, tag
    for path in (f"/api/v1/nodes/{name}", f"{NODESLOS}/{name}", cache.NODEMETRICS.path(name)):
        with contextlib.suppress(rest.ApiError):
            kube.delete(path)


def test_the_manager_does_its_job_as_its_service_account(
    manager: rest.Rest, node: tuple[str, str]
) -> None:
    """Reads its ConfigMap, creates the NodeSLO and NodeMetric, with no write refused."""
    name, tag = node
    registry = CollectorRegistry()
    reconciler = reconcile.Reconciler(
        manager,
        Metrics(registry),
        events.Recorder(manager, "nodeqos-manager"),
        namespace=NAMESPACE,
        node_selector=f"nodeqos-test={tag}",
    )
    reconciler.start()
    try:
        eventually(lambda: reconciler.synced, "the informers to sync as the manager")
        eventually(lambda: reconciler.nodes.get(name), "the node in the cache")
        assert reconciler.configmaps.get(f"{NAMESPACE}/slo-controller-config") is not None
        assert reconciler.reconcile() == 2
        assert manager.get(f"{NODESLOS}/{name}")["spec"]["resourceUsedThresholdWithBE"]
        assert manager.get(cache.NODEMETRICS.path(name))["spec"]["metricCollectPolicy"]
        refused = registry.get_sample_value(
            "nodeqos_manager_write_errors_total", {"kind": "nodeslo", "verb": "create"}
        )
        assert not refused
    finally:
        reconciler.stop()


def grant_status_writes(kube: rest.Rest) -> None:
    """A ClusterRole that WOULD let the manager write NodeMetric status (a mistake an
    operator might make), bound to its ServiceAccount."""
    localcluster.apply(
        kube,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": STATUS_WRITER},
            "rules": [
                {
                    "apiGroups": ["slo.koordinator.sh"],
                    "resources": ["nodemetrics/status"],
                    "verbs": ["update", "patch"],
                }
            ],
        },
    )
    localcluster.apply(
        kube,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": STATUS_WRITER},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": STATUS_WRITER,
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": "nodeqos-manager", "namespace": NAMESPACE}
            ],
        },
    )


def test_the_manager_cannot_write_nodemetric_status(
    manager: rest.Rest, kube: rest.Rest, node: tuple[str, str]
) -> None:
    """RBAC refuses it; with a status role bound anyway, the admission policy still does."""
    name, _ = node
    kube.create(
        cache.NODEMETRICS.path(),
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": name},
        },
    )
    status_path = cache.NODEMETRICS.path(name, subresource="status")
    body = {"status": {"updateTime": localcluster.now_rfc3339()}}
    with pytest.raises(rest.ApiError) as by_rbac:
        manager.patch(status_path, body)
    assert by_rbac.value.status == 403
    grant_status_writes(kube)
    try:
        deadline = time.monotonic() + 30
        while True:  # RBAC and the policy informer both take a moment to see new objects
            try:
                manager.patch(status_path, body)
            except rest.ApiError as err:
                refused = err
                if "status belongs to the node's agent" in str(err):
                    break
            else:  # the policy was not in force yet: undo the write, try again
                current = kube.get(cache.NODEMETRICS.path(name))
                kube.replace(status_path, {**current, "status": {}})
            assert time.monotonic() < deadline, "the admission policy never refused the write"
            time.sleep(0.2)
        assert refused.status == 403
        assert "updateTime" not in (kube.get(cache.NODEMETRICS.path(name)).get("status") or {})
        # spec writes through the main resource stay allowed
        manager.patch(
            cache.NODEMETRICS.path(name),
            {"spec": {"metricCollectPolicy": {"reportIntervalSeconds": 30}}},
        )
    finally:
        for path in (
            f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{STATUS_WRITER}",
            f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{STATUS_WRITER}",
        ):
            kube.delete(path)
