"""deploy/ manifests against the real API server: they apply, and RBAC is least privilege."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kube import rest
from testbed import localcluster

pytestmark = pytest.mark.controlplane

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def documents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                found.append((path.name, doc))
    return found


@pytest.fixture(scope="module")
def applied(kube: rest.Rest) -> list[tuple[str, dict[str, Any]]]:
    """Namespaces and RBAC for real (SubjectAccessReviews need them), the rest validated by dry-run."""
    docs = documents()
    for _, doc in docs:
        if doc["kind"] in (
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
        ):
            localcluster.apply(kube, doc)
    return docs


def test_every_manifest_passes_server_side_dry_run(
    kube: rest.Rest, applied: list[tuple[str, dict[str, Any]]]
) -> None:
    """Each object in deploy/*.yaml is accepted by the API server (kubectl apply --dry-run=server)."""
    assert any(doc["kind"] == "DaemonSet" for _, doc in applied)
    for name, doc in applied:
        assert doc["kind"] in localcluster.MANIFEST_KINDS, (
            f"{name}: add {doc['kind']} to MANIFEST_KINDS"
        )
        localcluster.apply(kube, doc, dry_run=True)


def can(
    kube: rest.Rest,
    user: str,
    verb: str,
    resource: str,
    *,
    group: str = "",
    subresource: str = "",
    namespace: str = "default",
) -> bool:
    review = kube.create(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": ["system:serviceaccounts", "system:authenticated"],
                "resourceAttributes": {
                    "verb": verb,
                    "group": group,
                    "resource": resource,
                    "subresource": subresource,
                    "namespace": namespace,
                },
            },
        },
    )
    return bool(review["status"]["allowed"])


AGENT = "system:serviceaccount:nodeqos-system:nodeqos-agent"


@pytest.mark.parametrize(
    ("verb", "resource", "group", "subresource", "allowed"),
    [
        pytest.param(
            "update",
            "nodemetrics",
            "slo.koordinator.sh",
            "status",
            True,
            id="update-nodemetric-status",
        ),
        pytest.param(
            "create", "nodemetrics", "slo.koordinator.sh", "", True, id="create-nodemetric"
        ),
        pytest.param("watch", "nodeslos", "slo.koordinator.sh", "", True, id="watch-nodeslo"),
        pytest.param("create", "pods", "", "eviction", True, id="evict-pods"),
        pytest.param("list", "pods", "", "", True, id="list-pods"),
        pytest.param("watch", "nodes", "", "", True, id="watch-nodes"),
        pytest.param("create", "events", "", "", True, id="record-events"),
        pytest.param("get", "nodemetrics", "slo.koordinator.sh", "", True, id="get-nodemetric"),
        pytest.param("get", "pods", "", "", False, id="no-pod-gets"),
        pytest.param("get", "nodes", "", "", False, id="no-node-gets"),
        pytest.param("patch", "events", "", "", False, id="no-event-patches"),
        pytest.param("create", "events", "events.k8s.io", "", False, id="no-events-k8s-io"),
        pytest.param(
            "update", "nodemetrics", "slo.koordinator.sh", "", False, id="no-nodemetric-spec-writes"
        ),
        pytest.param(
            "patch",
            "nodemetrics",
            "slo.koordinator.sh",
            "status",
            False,
            id="no-nodemetric-status-patches",
        ),
        pytest.param(
            "delete", "nodemetrics", "slo.koordinator.sh", "", False, id="no-nodemetric-deletes"
        ),
        pytest.param("create", "pods", "", "binding", False, id="no-bindings"),
        pytest.param("update", "pods", "", "status", False, id="no-pod-status-writes"),
        pytest.param("get", "secrets", "", "", False, id="no-secrets"),
        pytest.param("delete", "nodes", "", "", False, id="no-node-deletes"),
        pytest.param("delete", "pods", "", "", False, id="no-pod-deletes"),
        pytest.param("update", "nodeslos", "slo.koordinator.sh", "", False, id="no-nodeslo-writes"),
    ],
)
def test_agent_rbac_is_least_privilege(
    kube: rest.Rest,
    applied: object,
    verb: str,
    resource: str,
    group: str,
    subresource: str,
    allowed: bool,
) -> None:
    """The agent's ServiceAccount may do exactly what it needs."""
    assert can(kube, AGENT, verb, resource, group=group, subresource=subresource) is allowed


DESCHEDULER = "system:serviceaccount:nodeqos-system:nodeqos-descheduler"


@pytest.mark.parametrize(
    ("verb", "resource", "group", "subresource", "namespace", "allowed"),
    [
        pytest.param("create", "pods", "", "eviction", "default", True, id="evict-pods"),
        pytest.param("watch", "pods", "", "", "", True, id="watch-pods"),
        pytest.param("list", "nodes", "", "", "", True, id="list-nodes"),
        pytest.param("watch", "namespaces", "", "", "", True, id="watch-namespaces"),
        pytest.param("list", "poddisruptionbudgets", "policy", "", "", True, id="list-pdbs"),
        pytest.param(
            "watch",
            "priorityclasses",
            "scheduling.k8s.io",
            "",
            "",
            True,
            id="watch-priorityclasses",
        ),
        pytest.param(
            "list", "nodemetrics", "slo.koordinator.sh", "", "", True, id="list-nodemetrics"
        ),
        pytest.param("list", "nodes", "metrics.k8s.io", "", "", True, id="list-node-metrics"),
        pytest.param("get", "pods", "metrics.k8s.io", "", "default", True, id="get-pod-metrics"),
        pytest.param(
            "create", "pods", "metrics.k8s.io", "", "default", False, id="no-metrics-writes"
        ),
        pytest.param("create", "events", "", "", "default", True, id="record-events"),
        pytest.param(
            "update", "leases", "coordination.k8s.io", "", "nodeqos-system", True, id="update-lease"
        ),
        pytest.param(
            "create", "leases", "coordination.k8s.io", "", "nodeqos-system", True, id="create-lease"
        ),
        pytest.param(
            "update",
            "leases",
            "coordination.k8s.io",
            "",
            "kube-system",
            False,
            id="no-leases-elsewhere",
        ),
        pytest.param("get", "secrets", "", "", "nodeqos-system", False, id="no-secrets"),
        pytest.param("delete", "nodes", "", "", "", False, id="no-node-deletes"),
        pytest.param("delete", "pods", "", "", "default", False, id="no-pod-deletes"),
        pytest.param("update", "pods", "", "", "default", False, id="no-pod-writes"),
        pytest.param(
            "update",
            "nodemetrics",
            "slo.koordinator.sh",
            "status",
            "",
            False,
            id="no-nodemetric-writes",
        ),
        pytest.param(
            "create",
            "podmigrationjobs",
            "scheduling.koordinator.sh",
            "",
            "",
            False,
            id="no-podmigrationjobs-yet",
        ),
    ],
)
def test_descheduler_rbac_is_least_privilege(
    kube: rest.Rest,
    applied: object,
    verb: str,
    resource: str,
    group: str,
    subresource: str,
    namespace: str,
    allowed: bool,
) -> None:
    """The descheduler's ServiceAccount may do exactly what the daemon needs."""
    assert (
        can(
            kube,
            DESCHEDULER,
            verb,
            resource,
            group=group,
            subresource=subresource,
            namespace=namespace,
        )
        is allowed
    )


def test_descheduler_configmap_loads_and_starts() -> None:
    """The example configuration in the ConfigMap loads and its profiles build."""
    from prometheus_client import CollectorRegistry

    from descheduler import config, framework, plugins
    from descheduler.app import simulate

    (configmap,) = (
        doc
        for name, doc in documents()
        if name == "descheduler.yaml" and doc["kind"] == "ConfigMap"
    )
    loaded = config.load_config(configmap["data"]["descheduler.yaml"], plugins=plugins.in_tree())
    assert loaded.leader_election.resource_namespace == "nodeqos-system"
    framework.Runner.from_config(
        loaded,
        plugins.registry(),
        source=framework.StaticSource(),
        backend=simulate.NoEvictions(),
        metrics=framework.Metrics(CollectorRegistry()),
    )


def test_descheduler_deployment_reads_its_configmap() -> None:
    """Two replicas, --config pointing into the mounted ConfigMap, probes on /healthz."""
    (deployment,) = (
        doc
        for name, doc in documents()
        if name == "descheduler.yaml" and doc["kind"] == "Deployment"
    )
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert deployment["spec"]["replicas"] == 2
    assert container["args"] == ["--config=/etc/nodeqos/descheduler.yaml"]
    assert pod["volumes"][0]["configMap"]["name"] == "nodeqos-descheduler-config"
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["path"] == "/healthz"


EXTENDER = "system:serviceaccount:nodeqos-system:nodeqos-scheduler-extender"


@pytest.mark.parametrize(
    ("verb", "resource", "group", "subresource", "allowed"),
    [
        pytest.param("watch", "nodes", "", "", True, id="watch-nodes"),
        pytest.param("list", "pods", "", "", True, id="list-pods"),
        pytest.param(
            "watch", "nodemetrics", "slo.koordinator.sh", "", True, id="watch-nodemetrics"
        ),
        pytest.param("create", "pods", "", "binding", False, id="no-bindings"),
        pytest.param("create", "pods", "", "eviction", False, id="no-evictions"),
        pytest.param(
            "update", "nodemetrics", "slo.koordinator.sh", "status", False, id="no-writes"
        ),
        pytest.param("get", "secrets", "", "", False, id="no-secrets"),
        pytest.param("create", "events", "", "", False, id="no-events"),
    ],
)
def test_extender_rbac_is_read_only(
    kube: rest.Rest,
    applied: object,
    verb: str,
    resource: str,
    group: str,
    subresource: str,
    allowed: bool,
) -> None:
    """The scheduler extender reads Nodes, Pods and NodeMetrics; kube-scheduler does the binding."""
    assert can(kube, EXTENDER, verb, resource, group=group, subresource=subresource) is allowed


def test_extender_configmap_args_load_and_the_deployment_uses_them() -> None:
    """The shipped args decode; the Deployment mounts them, probes /healthz, serves on its port."""
    from extender import args as argsmod

    docs = {doc["kind"]: doc for name, doc in documents() if name == "scheduler-extender.yaml"}
    args = argsmod.decode_args(yaml.safe_load(docs["ConfigMap"]["data"]["loadaware.yaml"]))
    assert args.usage_thresholds["cpu"] == 65
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["nodeqos-scheduler-extender"]
    assert "--config=/etc/nodeqos/loadaware.yaml" in container["args"]
    assert pod["volumes"][0]["configMap"]["name"] == docs["ConfigMap"]["metadata"]["name"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert docs["Service"]["spec"]["ports"][0]["port"] == 10262


@pytest.mark.parametrize("name", ["extender.yaml", "second-scheduler.yaml"])
def test_shipped_scheduler_configs_wire_the_extender_safely(name: str) -> None:
    """Both KubeSchedulerConfigurations: node names only, ignorable, the Service's port.
    (tests/extender/test_e2e.py runs each with the real kube-scheduler.)"""
    config = yaml.safe_load((DEPLOY / "kube-scheduler" / name).read_text())
    assert config["kind"] == "KubeSchedulerConfiguration"
    (extender,) = config["extenders"]
    assert extender["nodeCacheCapable"] is True
    assert extender["ignorable"] is True
    assert extender["urlPrefix"].endswith(":10262")
    assert (extender["filterVerb"], extender["prioritizeVerb"]) == ("filter", "prioritize")


MANAGER = "system:serviceaccount:nodeqos-system:nodeqos-manager"
SLO = "slo.koordinator.sh"


@pytest.mark.parametrize(
    ("verb", "resource", "group", "subresource", "namespace", "allowed"),
    [
        pytest.param("watch", "nodes", "", "", "", True, id="watch-nodes"),
        pytest.param("create", "nodeslos", SLO, "", "", True, id="create-nodeslos"),
        pytest.param("patch", "nodeslos", SLO, "", "", True, id="patch-nodeslos"),
        pytest.param("delete", "nodeslos", SLO, "", "", True, id="delete-nodeslos"),
        pytest.param("create", "nodemetrics", SLO, "", "", True, id="create-nodemetrics"),
        pytest.param("patch", "nodemetrics", SLO, "", "", True, id="patch-nodemetric-spec"),
        pytest.param(
            "update", "nodemetrics", SLO, "status", "", False, id="no-nodemetric-status-updates"
        ),
        pytest.param(
            "patch", "nodemetrics", SLO, "status", "", False, id="no-nodemetric-status-patches"
        ),
        pytest.param("update", "nodeslos", SLO, "status", "", False, id="no-nodeslo-status"),
        pytest.param(
            "watch", "configmaps", "", "", "nodeqos-system", False, id="no-other-configmaps"
        ),
        pytest.param("create", "events", "", "", "nodeqos-system", True, id="record-events"),
        # Events on Nodes (cluster-scoped objects) are recorded in `default`
        pytest.param("create", "events", "", "", "default", True, id="node-events-in-default"),
        pytest.param("create", "events", "", "", "kube-system", False, id="no-events-elsewhere"),
        pytest.param(
            "update", "leases", "coordination.k8s.io", "", "nodeqos-system", True, id="lease"
        ),
        pytest.param("update", "nodes", "", "", "", False, id="no-node-writes"),
        pytest.param("get", "secrets", "", "", "nodeqos-system", False, id="no-secrets"),
        # the Batch formula needs the high-priority pods' requests (read-only)
        pytest.param("list", "pods", "", "", "", True, id="read-pods"),
        pytest.param("create", "pods", "", "", "default", False, id="no-pod-writes"),
        pytest.param("delete", "pods", "", "", "default", False, id="no-pod-deletes"),
        pytest.param("patch", "nodes", "", "status", "", True, id="node-status-patch"),
        pytest.param("patch", "nodes", "", "", "", False, id="no-node-patch"),
    ],
)
def test_manager_rbac_is_least_privilege(
    kube: rest.Rest,
    applied: object,
    verb: str,
    resource: str,
    group: str,
    subresource: str,
    namespace: str,
    allowed: bool,
) -> None:
    """The manager's ServiceAccount may do exactly what the reconciler needs."""
    assert (
        can(
            kube,
            MANAGER,
            verb,
            resource,
            group=group,
            subresource=subresource,
            namespace=namespace,
        )
        is allowed
    )


def test_manager_configmap_loads_without_problems() -> None:
    """The example slo-controller-config loads cleanly and renders the defaults."""
    from manager import render, sloconfig

    (configmap,) = (
        doc for name, doc in documents() if name == "manager.yaml" and doc["kind"] == "ConfigMap"
    )
    loaded = sloconfig.load(configmap["data"])
    assert (loaded.problems, loaded.warnings) == ((), ())
    defaults = render.nodeslo_spec(sloconfig.load(None).config, {})
    assert render.nodeslo_spec(loaded.config, {}) == defaults
    assert render.nodemetric_spec(loaded.config, {}) == render.nodemetric_spec(
        sloconfig.load(None).config, {}
    )


def test_agent_probes_wait_for_a_slow_start_and_never_restart_for_the_api() -> None:
    """The agent's liveness probe reads /livez (alive through an API outage) and begins
    only after the startup probe's first answer, which may take ten minutes: an agent
    starting on a loaded node (an emulated VM node took over 75 s) is not killed for
    it; readiness is /healthz."""
    (daemonset,) = (
        doc for name, doc in documents() if name == "daemonset.yaml" and doc["kind"] == "DaemonSet"
    )
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    startup, liveness = container["startupProbe"], container["livenessProbe"]
    assert startup["httpGet"] == liveness["httpGet"] == {"path": "/livez", "port": "metrics"}
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 600
    assert "initialDelaySeconds" not in liveness
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
