"""The Helm chart (deploy/helm/nodeqos) against the plain manifests in deploy/.

With default values `helm template` renders the objects of deploy/*.yaml and
deploy/crds/, object by object, with two differences by design:

- the chart renders no Namespace: Helm installs into the release namespace
  (`helm install -n nodeqos-system --create-namespace`), and a chart that also
  rendered it could not be installed with --create-namespace;
- its Deployments' pod templates carry a `checksum/config` annotation, so that
  `helm upgrade` with a new configuration rolls the replicas (they read it once).

ConfigMap data holding YAML (`*.yaml`) or JSON (the manager's `*-config` keys) is
compared parsed (comments, layout and key order aside).
The chart's crds/ are the same files as deploy/crds/, byte for byte.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent import features
from descheduler import config, plugins
from extender import args as extender_args
from kube import rest
from testbed import controlplane, localcluster
from tests import helmchart
from tests.test_serverversion import _VersionServer as VersionServer

DEPLOY = helmchart.REPO / "deploy"
NAMESPACE = "nodeqos-system"
CHECKSUM = "checksum/config"

Key = tuple[str, str, str, str]


def key(doc: dict[str, Any]) -> Key:
    meta = doc["metadata"]
    return (doc["apiVersion"], doc["kind"], meta.get("namespace", ""), meta["name"])


def label(k: Key) -> str:
    _, kind, namespace, name = k
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def plain_objects() -> dict[Key, tuple[str, dict[str, Any]]]:
    """deploy/*.yaml and deploy/crds/*.yaml by key, with the file each came from."""
    found: dict[Key, tuple[str, dict[str, Any]]] = {}
    for path in [*sorted(DEPLOY.glob("*.yaml")), *sorted((DEPLOY / "crds").glob("*.yaml"))]:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                found.setdefault(key(doc), (str(path.relative_to(DEPLOY.parent)), doc))
    return found


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` with YAML and JSON documents in ConfigMap data parsed."""
    doc = copy.deepcopy(doc)
    if doc["kind"] == "ConfigMap":
        for name, text in (doc.get("data") or {}).items():
            if name.endswith((".yaml", ".yml")):
                doc["data"][name] = yaml.safe_load(text)
            elif name.endswith("-config"):
                doc["data"][name] = json.loads(text)
    return doc


def differences(plain: Any, chart: Any, path: str = "") -> Iterator[str]:
    """One line per field where the two disagree, named by its path."""
    if isinstance(plain, dict) and isinstance(chart, dict):
        for k in [*plain, *(k for k in chart if k not in plain)]:
            name = f"[{k!r}]" if "." in str(k) else f".{k}"
            where = f"{path}{name}" if path else str(k)
            if k not in chart:
                yield f"{where}: only in deploy/ ({plain[k]!r})"
            elif k not in plain:
                yield f"{where}: only in the chart ({chart[k]!r})"
            else:
                yield from differences(plain[k], chart[k], where)
    elif isinstance(plain, list) and isinstance(chart, list):
        for i, (p, c) in enumerate(zip(plain, chart, strict=False)):
            yield from differences(p, c, f"{path}[{i}]")
        for i in range(len(chart), len(plain)):
            yield f"{path}[{i}]: only in deploy/ ({plain[i]!r})"
        for i in range(len(plain), len(chart)):
            yield f"{path}[{i}]: only in the chart ({chart[i]!r})"
    elif plain != chart or type(plain) is not type(chart):
        yield f"{path}: deploy/ has {plain!r}, the chart renders {chart!r}"


def pod_annotations(doc: dict[str, Any]) -> dict[str, str]:
    annotations: dict[str, str] = doc["spec"]["template"]["metadata"].setdefault("annotations", {})
    return annotations


def test_default_values_render_the_plain_manifests() -> None:
    """helm template with default values renders deploy/ and deploy/crds/, object by object."""
    plain = plain_objects()
    rendered = helmchart.template(namespace=NAMESPACE, include_crds=True)
    chart: dict[Key, dict[str, Any]] = {}
    for doc in rendered:
        assert key(doc) not in chart, f"the chart renders {label(key(doc))} twice"
        chart[key(doc)] = doc

    problems = []
    for k, (source, doc) in plain.items():
        if k not in chart:
            if doc["kind"] == "Namespace" and doc["metadata"]["name"] == NAMESPACE:
                continue  # the release namespace: helm install --create-namespace
            problems.append(f"{label(k)} ({source}): not rendered by the chart")
            continue
        mine = chart[k]
        if doc["kind"] in ("Deployment", "DaemonSet"):
            checksum = pod_annotations(mine).pop(CHECKSUM, None)
            wants_checksum = doc["kind"] == "Deployment"
            if (checksum is not None) != wants_checksum:
                problems.append(
                    f"{label(k)}: spec.template.metadata.annotations.{CHECKSUM} "
                    f"{'missing' if wants_checksum else 'unexpected'} in the chart"
                )
        for line in differences(comparable(doc), comparable(mine)):
            problems.append(f"{label(k)} ({source}): {line}")
    for k in chart.keys() - plain.keys():
        problems.append(f"{label(k)}: rendered by the chart, not in deploy/")
    assert not problems, "the chart and deploy/ disagree:\n" + "\n".join(problems)


def test_chart_crds_are_deploy_crds() -> None:
    """The chart's crds/ holds exactly the files of deploy/crds/, byte for byte."""
    ours = {p.name: p.read_bytes() for p in (DEPLOY / "crds").glob("*.yaml")}
    chart = {p.name: p.read_bytes() for p in (helmchart.CHART / "crds").iterdir()}
    assert ours, "deploy/crds/ is empty"
    stale = sorted(n for n in ours.keys() | chart.keys() if ours.get(n) != chart.get(n))
    assert not stale, (
        f"deploy/helm/nodeqos/crds/ differs from deploy/crds/ in {stale}: the chart ships "
        "copies; refresh them with\n  rm deploy/helm/nodeqos/crds/* && "
        "cp deploy/crds/*.yaml deploy/helm/nodeqos/crds/"
    )


PROFILE = {
    "name": "hygiene",
    "plugins": {
        "deschedule": {"enabled": [{"name": "RemoveFailedPods"}]},
        "balance": {"enabled": [{"name": "RemoveDuplicates"}]},
    },
    "pluginConfig": [
        {"name": "DefaultEvictor", "args": {"nodeFit": True}},
        {
            "name": "RemoveFailedPods",
            "args": {"namespaces": {"exclude": ["kube-system", "{{ .Release.Namespace }}"]}},
        },
    ],
}

VALUES: dict[str, Any] = {
    "image": {"repository": "registry.example:5000/team/nodeqos", "tag": "1.2.3"},
    "agent": {
        "featureGates": {"PSICollector": True, "BECPUSuppress": False},
        "kubeletCgroupRoot": "/custom",
        "metricCache": {"hostPath": "/data/nodeqos", "perNodeSubPath": True},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
    },
    "descheduler": {
        "dryRun": True,
        "maxNoOfPodsToEvictPerNamespace": 2,
        "profiles": [PROFILE],
        "rbac": {"migration": True, "deletePods": True},
        "extraArgs": ["--eviction-backend=delete"],
        "metricsProviders": [
            {"source": "KubernetesMetrics"},
            {
                "source": "Prometheus",
                "prometheus": {
                    "url": "https://prometheus.monitoring:9090",
                    "authToken": {"secretReference": {"namespace": "monitoring", "name": "tok"}},
                },
            },
        ],
    },
    "schedulerExtender": {"replicas": 3, "args": {"usageThresholds": {"cpu": 50}}},
}


def by_kind_name(docs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def container(doc: dict[str, Any]) -> dict[str, Any]:
    (only,) = doc["spec"]["template"]["spec"]["containers"]
    result: dict[str, Any] = only
    return result


def test_values_change_the_render() -> None:
    """Image, feature gates, agent host paths, profiles, metricsProviders (with the token
    Secret's Role), opt-in RBAC and the extender's args come from values, in forms the components themselves accept."""
    docs = by_kind_name(helmchart.template(VALUES))
    workloads = [d for d in docs.values() if d["kind"] in ("DaemonSet", "Deployment")]
    assert len(workloads) == 4
    for doc in workloads:
        assert container(doc)["image"] == "registry.example:5000/team/nodeqos:1.2.3"

    agent = container(docs["DaemonSet", "nodeqos-agent"])
    (gates,) = (a.removeprefix("--feature-gates=") for a in agent["args"] if "feature-gates" in a)
    assert gates == "BECPUSuppress=false,PSICollector=true"
    parsed = features.parse(gates)
    assert parsed.enabled("PSICollector") and not parsed.enabled("BECPUSuppress")
    assert "--kubelet-cgroup-root=/custom" in agent["args"]
    assert agent["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi"}
    (state,) = (m for m in agent["volumeMounts"] if m["name"] == "state")
    assert state["subPathExpr"] == "$(NODE_NAME)"
    volumes = docs["DaemonSet", "nodeqos-agent"]["spec"]["template"]["spec"]["volumes"]
    assert {
        "name": "state",
        "hostPath": {"path": "/data/nodeqos", "type": "DirectoryOrCreate"},
    } in (volumes)

    text = docs["ConfigMap", "nodeqos-descheduler-config"]["data"]["descheduler.yaml"]
    loaded = config.load_config(text, plugins=plugins.in_tree())
    assert [p.name for p in loaded.profiles] == ["hygiene"]
    assert loaded.dry_run
    assert loaded.max_pods_to_evict_per_namespace == 2
    assert yaml.safe_load(text)["profiles"][0]["pluginConfig"][1]["args"]["namespaces"] == {
        "exclude": ["kube-system", NAMESPACE]
    }
    deschedulers = docs["Deployment", "nodeqos-descheduler"]
    assert container(deschedulers)["args"][1:] == ["--eviction-backend=delete"]
    assert ("ClusterRole", "nodeqos-descheduler-migration") in docs
    assert ("ClusterRoleBinding", "nodeqos-descheduler-delete-pods") in docs
    assert [str(p.source) for p in loaded.metrics_providers] == ["KubernetesMetrics", "Prometheus"]
    token_role = docs["Role", "nodeqos-descheduler-prometheus-token"]
    assert token_role["metadata"]["namespace"] == "monitoring"
    assert token_role["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["tok"], "verbs": ["get"]}
    ]
    binding = docs["RoleBinding", "nodeqos-descheduler-prometheus-token"]
    assert binding["subjects"][0]["namespace"] == NAMESPACE

    extender = docs["ConfigMap", "nodeqos-scheduler-extender-config"]["data"]["loadaware.yaml"]
    assert extender_args.decode_args(yaml.safe_load(extender)).usage_thresholds == {
        "cpu": 50,
        "memory": 80,
    }
    assert docs["Deployment", "nodeqos-scheduler-extender"]["spec"]["replicas"] == 3


def test_a_new_configuration_rolls_the_pods_and_nothing_else_does() -> None:
    """The pod template's checksum follows the configuration, not the replica count."""

    def checksums(values: dict[str, Any]) -> list[str]:
        docs = by_kind_name(helmchart.template(values))
        return [
            pod_annotations(docs["Deployment", name])[CHECKSUM]
            for name in ("nodeqos-descheduler", "nodeqos-scheduler-extender")
        ]

    base = checksums({})
    assert checksums({"descheduler": {"replicas": 3}, "schedulerExtender": {"replicas": 1}}) == (
        base
    )
    descheduler, extender = checksums(
        {"descheduler": {"profiles": [PROFILE]}, "schedulerExtender": {"args": {"x": 1}}}
    )
    assert descheduler != base[0] and extender != base[1]


def test_release_namespace_reaches_every_reference() -> None:
    """Installed elsewhere, the policies, bindings, Lease and profiles name that namespace."""
    docs = helmchart.template(namespace="qos")
    text = yaml.safe_dump_all(docs)
    assert NAMESPACE not in text
    by_name = by_kind_name(docs)
    policy = by_name["ValidatingAdmissionPolicy", "nodeqos-agent-own-nodemetric"]
    assert (
        "system:serviceaccount:qos:nodeqos-agent"
        in policy["spec"]["matchConditions"][0]["expression"]
    )
    loaded = config.load_config(
        by_name["ConfigMap", "nodeqos-descheduler-config"]["data"]["descheduler.yaml"],
        plugins=plugins.in_tree(),
    )
    assert loaded.leader_election.resource_namespace == "qos"


@pytest.mark.parametrize(
    "values", [pytest.param({}, id="defaults"), pytest.param(VALUES, id="every-value")]
)
def test_helm_lint_is_clean(values: dict[str, Any]) -> None:
    """helm lint --strict: no errors, no warnings."""
    done = helmchart.run("lint", "--strict", str(helmchart.CHART), values=values, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "[WARNING]" not in output and "[ERROR]" not in output, output


@pytest.mark.parametrize(
    ("kube_version", "accepted"), [("1.33.7", False), ("1.34.0", True), ("1.37.1", True)]
)
def test_the_chart_refuses_a_cluster_older_than_1_34(kube_version: str, accepted: bool) -> None:
    """kubeVersion: helm stops on an older server with its own message naming the range
    (docs/compatibility.md); 1.34 and newer render."""
    done = helmchart.run(
        "template", helmchart.RELEASE, str(helmchart.CHART), "--kube-version", kube_version,
        check=False,
    )  # fmt: skip
    if accepted:
        assert done.returncode == 0, done.stderr
    else:
        assert done.returncode != 0
        assert "chart requires kubeVersion: >=1.34.0-0 which is incompatible with Kubernetes" in (
            done.stderr
        ), done.stderr


def test_helm_install_on_a_1_33_server_stops_with_the_charts_version_message(
    tmp_path: Path,
) -> None:
    """`helm install` asks the server its version (GET /version, then discovery) and stops
    with the chart's kubeVersion message: server-side dry run, and without the CRDs
    (helm 3 applies a chart's crds/ before that check on a real install:
    docs/compatibility.md says so)."""
    server = VersionServer("33")
    install = ["install", helmchart.RELEASE, str(helmchart.CHART), "--namespace", NAMESPACE,
               "--kubeconfig", str(server.kubeconfig(tmp_path / "kubeconfig"))]  # fmt: skip
    try:
        done = [
            helmchart.run(*install, flag, check=False)
            for flag in ("--dry-run=server", "--skip-crds")
        ]
    finally:
        server.close()
    for attempt in done:
        assert attempt.returncode != 0
        assert (
            "chart requires kubeVersion: >=1.34.0-0 which is incompatible with Kubernetes v1.33.9"
            in attempt.stderr
        ), attempt.stderr


@pytest.mark.controlplane
def test_every_value_renders_objects_the_api_server_accepts(
    kube: rest.Rest, namespace: str
) -> None:
    """The render with every value set passes server-side dry-run, object by object."""
    docs = helmchart.template(VALUES, namespace=namespace)
    assert {d["kind"] for d in docs} <= set(localcluster.MANIFEST_KINDS)
    # the Prometheus token Secret's namespace (VALUES' metricsProviders)
    localcluster.apply(kube, {"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": "monitoring"}})  # fmt: skip
    for doc in docs:
        localcluster.apply(kube, doc, dry_run=True)


@pytest.mark.controlplane
def test_install_dry_run_warns_while_the_image_is_the_placeholder(
    private_control_plane: controlplane.ControlPlane,
) -> None:
    """helm install --dry-run=server passes the chart's kubeVersion check on our API server,
    and its notes say that the placeholder image cannot start, until an image is given.

    On a control plane of its own: helm refuses to adopt the objects other tests
    apply under the same names (tests/deploy/test_manifests.py)."""
    install = [
        "install",
        helmchart.RELEASE,
        str(helmchart.CHART),
        "--namespace",
        NAMESPACE,
        "--dry-run=server",
        "--kubeconfig",
        str(private_control_plane.kubeconfig),
    ]
    placeholder = helmchart.run(*install).stdout
    assert "WARNING: image.repository is the placeholder NODEQOS_IMAGE" in placeholder
    given = helmchart.run(*install, values={"image": {"repository": "r.example/nodeqos"}}).stdout
    assert "WARNING" not in given
    assert "http://nodeqos-scheduler-extender.nodeqos-system.svc:10262" in given
