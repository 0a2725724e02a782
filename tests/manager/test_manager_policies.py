"""deploy/manager.yaml on the real API server: the manager's ServiceAccount does its whole
job with the rights it is given, and cannot write NodeMetric status even when a broader
role is bound to it (the ValidatingAdmissionPolicy)."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from kube import cache, events, rest
from manager import batchresource, probability, profilecontroller, reconcile
from manager.noderesource import parse_colocation_config
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


def _refused(
    manager: rest.Rest, kube: rest.Rest, name: str, body: dict[str, Any], says: str
) -> rest.ApiError:
    """Patch node `name`'s status as the manager until the policy refuses it (it takes a
    moment to be in force); a write let through meanwhile is undone as the admin."""
    path = f"/api/v1/nodes/{name}/status"
    original = kube.get(f"/api/v1/nodes/{name}")
    deadline = time.monotonic() + 30
    while True:
        try:
            manager.patch(path, body)
        except rest.ApiError as err:
            if says in str(err):
                return err
        else:
            current = kube.get(f"/api/v1/nodes/{name}")
            kube.replace(path, {**current, "status": original["status"]})
        assert time.monotonic() < deadline, "the admission policy never refused the write"
        time.sleep(0.2)


def test_the_manager_may_change_only_batch_and_mid_resources_of_a_node(
    manager: rest.Rest, kube: rest.Rest, node: tuple[str, str]
) -> None:
    """batch-cpu and mid-cpu patches pass; allocatable cpu, a condition or a label are refused."""
    name, _ = node
    refused = _refused(
        manager,
        kube,
        name,
        {"status": {"allocatable": {"cpu": "1"}}},
        "only kubernetes.io/batch-* and kubernetes.io/mid-* in status.allocatable",
    )
    assert refused.status == 403
    assert kube.get(f"/api/v1/nodes/{name}")["status"]["allocatable"]["cpu"] == "4"
    ours = {"kubernetes.io/batch-cpu": "1500", "kubernetes.io/mid-cpu": "500"}
    manager.patch(
        f"/api/v1/nodes/{name}/status", {"status": {"capacity": ours, "allocatable": ours}}
    )
    status = kube.get(f"/api/v1/nodes/{name}")["status"]
    assert status["allocatable"]["kubernetes.io/batch-cpu"] == "1500"
    assert status["capacity"]["kubernetes.io/mid-cpu"] == "500"
    condition = {"type": "Ready", "status": "False", "reason": "Test"}
    refused = _refused(
        manager,
        kube,
        name,
        {"status": {"conditions": [condition]}},
        "conditions, addresses, nodeInfo",
    )
    assert refused.status == 403
    removed = {"status": {"capacity": {"cpu": None}}}
    assert _refused(manager, kube, name, removed, "status.capacity").status == 403


def test_the_batch_controller_works_as_the_service_account(
    manager: rest.Rest, kube: rest.Rest, node: tuple[str, str]
) -> None:
    """Pods and Nodes readable, batch resources patched and the degrade Event written as the SA."""
    name, tag = node
    registry = CollectorRegistry()
    controller = batchresource.BatchController(
        manager,
        Metrics(registry),
        events.Recorder(manager, "nodeqos-manager"),
        namespace=NAMESPACE,
        name="slo-controller-config",  # deploy's has colocation off: turned on below
        node_selector=f"nodeqos-test={tag}",
    )
    controller.start()
    try:
        eventually(lambda: controller.synced, "the batch informers to sync as the manager")
        eventually(lambda: controller.nodes.get(name), "the node in the cache")
        controller.sync_config()
        controller.config = parse_colocation_config('{"enable": true}')
        assert controller.sync_node(name)  # no NodeMetric: degraded to 0, written
        status = kube.get(f"/api/v1/nodes/{name}")["status"]
        assert status["allocatable"]["kubernetes.io/batch-cpu"] == "0"
        selector = f"involvedObject.name={name},reason={batchresource.DEGRADED_REASON}"
        eventually(
            lambda: kube.get("/api/v1/events", fieldSelector=selector)["items"],
            "the degrade Event",
        )
        assert not registry.get_sample_value(
            "nodeqos_manager_write_errors_total", {"kind": "node-status", "verb": "patch"}
        )
    finally:
        controller.stop()


def _allowed(
    client: rest.Rest, verb: str, group: str, resource: str, name: str = "", namespace: str = ""
) -> bool:
    attributes = {"verb": verb, "group": group, "resource": resource}
    if name:
        attributes["name"] = name
    if namespace:
        attributes["namespace"] = namespace
    review = client.create(
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        },
    )
    return bool(review["status"].get("allowed"))


def test_the_profile_controller_works_as_the_service_account(
    manager: rest.Rest, kube: rest.Rest, tmp_path: Path
) -> None:
    """As the SA: the webhook certificate's Secret made, a profile's policy, binding and
    webhook configuration created, replaced and deleted, no write refused; the SA may not
    write profiles, other admission objects, other Secrets or PriorityClasses."""
    suffix = uuid.uuid4().hex[:8]
    name = f"sa-{suffix}"
    policy = f"{profilecontroller.POLICIES.path()}/nodeqos-colocation-{name}"
    binding = f"{profilecontroller.BINDINGS.path()}/nodeqos-colocation-{name}"
    profile = profilecontroller.PROFILES.path(name)
    secret = f"/api/v1/namespaces/{NAMESPACE}/secrets/{probability.SECRET}"
    with contextlib.suppress(rest.ApiError):
        kube.delete(secret)
    certificate = probability.shared_certificate(manager, NAMESPACE, tmp_path, ["127.0.0.1"])
    (tmp_path / "second").mkdir()
    again = probability.shared_certificate(manager, NAMESPACE, tmp_path / "second", ["127.0.0.1"])
    assert again.ca_pem == certificate.ca_pem  # the second replica takes the stored one
    webhook = f"{profilecontroller.WEBHOOKS.path()}/{probability.CONFIGURATION}"
    controller = profilecontroller.ProfileController(
        manager,
        events.Recorder(manager, "nodeqos-manager"),
        webhook=profilecontroller.Webhook({"url": "https://127.0.0.1:9"}, certificate.ca_pem),
    )
    controller.start()
    try:
        eventually(lambda: controller.synced, "the profile informers to sync as the manager")
        kube.create(
            profilecontroller.PROFILES.path(),
            {
                "apiVersion": "config.koordinator.sh/v1alpha1",
                "kind": "ClusterColocationProfile",
                "metadata": {"name": name},
                "spec": {
                    "selector": {"matchLabels": {"sa": suffix}},
                    "qosClass": "BE",
                    "priorityClassName": "",
                    "probability": "30%",
                },
            },
        )
        eventually(lambda: controller.profiles.get(name), "the profile in the cache")
        # sent as the SA (>=: managed objects other tests left behind are deleted too);
        # a refused write is only logged, so the objects themselves prove it
        assert controller.reconcile() >= 3
        eventually(lambda: kube.get(policy) and kube.get(binding), "the policy and binding")
        eventually(lambda: kube.get(webhook), "the webhook configuration")
        stored = kube.get(profile)
        stored["spec"]["qosClass"] = "LS"
        kube.replace(profile, stored)
        eventually(
            lambda: (controller.profiles.get(name) or {}).get("spec", {}).get("qosClass") == "LS",
            "the changed profile in the cache",
        )
        eventually(
            lambda: controller.owned["MutatingAdmissionPolicy"].get(f"nodeqos-colocation-{name}"),
            "the policy in the cache",
        )
        eventually(
            lambda: controller.owned["MutatingWebhookConfiguration"].get(probability.CONFIGURATION),
            "the webhook configuration in the cache",
        )
        assert controller.reconcile() >= 1  # the policy replaced
        eventually(
            lambda: "LS" in str(kube.get(policy)["spec"]["mutations"]), "the replaced policy"
        )
        kube.delete(profile)
        eventually(lambda: controller.profiles.get(name) is None, "the profile gone from the cache")
        assert controller.reconcile() >= 3
        eventually(lambda: not _exists(kube, policy) and not _exists(kube, binding), "both deleted")
        eventually(lambda: not _exists(kube, webhook), "the webhook configuration deleted")
    finally:
        controller.stop()
        for path in (profile, binding, policy, webhook, secret):
            with contextlib.suppress(rest.ApiError):
                kube.delete(path)
    admission = "admissionregistration.k8s.io"
    for verb in ("create", "update", "delete"):
        for resource in ("mutatingadmissionpolicies", "mutatingadmissionpolicybindings"):
            assert _allowed(manager, verb, admission, resource), (verb, resource)
    for verb, group, resource in (
        ("patch", admission, "mutatingadmissionpolicies"),
        ("create", admission, "validatingadmissionpolicies"),
        ("create", "config.koordinator.sh", "clustercolocationprofiles"),
        ("update", "config.koordinator.sh", "clustercolocationprofiles"),
        ("create", "scheduling.k8s.io", "priorityclasses"),
        ("create", "", "pods"),
    ):
        assert not _allowed(manager, verb, group, resource), (verb, group, resource)
    for verb, group, resource, *where in (
        ("update", admission, "mutatingwebhookconfigurations", "someone-elses"),
        ("delete", admission, "mutatingwebhookconfigurations", "someone-elses"),
        ("get", "", "secrets", "someone-elses", NAMESPACE),
        ("list", "", "secrets", "", NAMESPACE),
    ):
        assert not _allowed(manager, verb, group, resource, *where), (verb, resource, *where)


def _exists(kube: rest.Rest, path: str) -> bool:
    try:
        kube.get(path)
    except rest.ApiError as err:
        assert err.not_found
        return False
    return True
