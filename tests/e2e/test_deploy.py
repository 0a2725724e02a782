"""nodeqos installed as a user installs it, on the real nodes (issue 15, test 1),
twice, one install after the other (the two share cluster-scoped names):

- ``manifests``: the CRDs and every manifest of deploy/ through our applier
  (`kubectl apply -f deploy/crds/ -f deploy/` equivalent), with the locally
  built image in place of the ``NODEQOS_IMAGE`` placeholder;
- ``helm``: `helm install` of deploy/helm/nodeqos (helm built by
  hack/build-helm.sh) into the same namespace, the image given as values.

Each time the agent DaemonSet runs in cluster mode on every node, is Ready and
publishes each node's NodeMetric; one descheduler replica holds its Lease; the
scheduler extender's replicas are Ready and kube-scheduler, given
deploy/kube-scheduler/extender.yaml, consults them.

Two changes to the defaults, both what a user of these nodes would write (a
kustomize overlay, or chart values), because this machine runs three nodes on
one host (the defaults stay as they are for real nodes):

- ``--kubelet-cgroup-root=/nodeqos-$(NODE_NAME)``: each local kubelet has its
  own cgroupRoot (testbed.localnodes), which the agent must be told;
- the metric cache's hostPath (``/var/lib/nodeqos``) would be one directory
  for all three agents on one host: it moves to a temporary dir with a
  per-node ``subPathExpr``.

The manifests are testbed.placementloop.one_host_manifests, which the placement
scenario overlays further.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube import rest, slo
from testbed import localcluster, placementloop
from tests import helmchart
from tests.e2e import pods
from tests.e2e.conftest import RealCluster, wait_namespace_ready

pytestmark = [pytest.mark.e2e, pytest.mark.controlplane, pytest.mark.slow]

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NAMESPACE = "nodeqos-system"
EXTENDER_PORT = 10262


def ready(pod: dict[str, Any]) -> bool:
    conditions = pod["status"].get("conditions", [])
    return pod["metadata"].get("deletionTimestamp") is None and any(
        c["type"] == "Ready" and c["status"] == "True" for c in conditions
    )


def describe(kube: rest.Rest) -> str:
    """The namespace's pods, for a failure message: phase, node, container states."""
    lines = []
    for p in kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]:
        states = {
            s["name"]: (s["ready"], s["restartCount"], s["state"], s.get("lastState"))
            for s in p["status"].get("containerStatuses", [])
        }
        lines.append(
            f"{p['metadata']['name']} on {p['spec'].get('nodeName')}: "
            f"{p['status'].get('phase')} {states}"
        )
    return "\n".join(lines) or "(no pods)"


def delete_objects(kube: rest.Rest, docs: list[dict[str, Any]]) -> None:
    for doc in reversed(docs):
        group, version, plural, namespaced = localcluster.MANIFEST_KINDS[doc["kind"]]
        meta = doc["metadata"]
        path = rest.object_path(
            group,
            version,
            plural,
            meta["name"],
            namespace=meta.get("namespace") if namespaced else None,
        )
        try:
            kube.delete(path)
        except rest.ApiError as err:
            if not err.not_found:
                raise


def namespace_gone(kube: rest.Rest) -> bool:
    try:
        kube.get(f"/api/v1/namespaces/{NAMESPACE}")
    except rest.ApiError as err:
        if err.not_found:
            return True
        raise
    return False


def chart_values(image: str, state_dir: Path) -> dict[str, Any]:
    """The chart's values for this host: the image, and the agent's overlay above."""
    repository, _, tag = image.rpartition(":")
    return {
        "image": {"repository": repository, "tag": tag},
        "agent": {
            "kubeletCgroupRoot": "/nodeqos-$(NODE_NAME)",
            "metricCache": {"hostPath": str(state_dir), "perNodeSubPath": True},
        },
    }


@contextlib.contextmanager
def applied_manifests(real_cluster: RealCluster, image: str, state_dir: Path) -> Iterator[None]:
    """deploy/crds and deploy/ applied; the objects of deploy/ deleted afterwards."""
    kube = real_cluster.kube
    real_cluster.plane.install_crds(DEPLOY / "crds")
    docs = placementloop.one_host_manifests(image, state_dir)
    try:
        for doc in docs:
            localcluster.apply(kube, doc)
            if doc["kind"] == "Namespace":
                wait_namespace_ready(kube, doc["metadata"]["name"])
        yield
    finally:
        delete_objects(kube, docs)


@contextlib.contextmanager
def helm_release(real_cluster: RealCluster, image: str, state_dir: Path) -> Iterator[None]:
    """`helm install` of the chart; `helm uninstall` and the namespace deleted afterwards."""
    kube = real_cluster.kube
    # A namespace the previous install deleted must be gone before
    # --create-namespace can make it again.
    pods.wait_for(lambda: namespace_gone(kube), f"namespace {NAMESPACE} deleted", timeout=120)
    release = [
        helmchart.RELEASE,
        "--namespace",
        NAMESPACE,
        "--kubeconfig",
        str(real_cluster.plane.kubeconfig),
    ]
    try:
        helmchart.run(
            "install",
            *release,
            str(helmchart.CHART),
            "--create-namespace",
            values=chart_values(image, state_dir),
        )
        yield
    finally:
        done = helmchart.run("uninstall", *release, "--wait", check=False)
        if done.returncode != 0 and "not found" not in done.stderr:
            raise AssertionError(f"helm uninstall failed: {done.stderr}")
        if not namespace_gone(kube):  # helm uninstall leaves it
            kube.delete(f"/api/v1/namespaces/{NAMESPACE}")


@pytest.fixture(scope="module", params=["manifests", "helm"])
def installed(
    request: pytest.FixtureRequest,
    real_cluster: RealCluster,
    nodeqos_image: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """nodeqos installed one way (the param, yielded), then removed: its pods are
    gone before the next install."""
    kube = real_cluster.kube
    install = applied_manifests if request.param == "manifests" else helm_release
    state_dir = tmp_path_factory.mktemp(request.param) / "state"
    wait_namespace_gone(kube)  # an earlier install's, still terminating on a busy machine
    try:
        with install(real_cluster, nodeqos_image, state_dir):
            yield request.param
    finally:
        localcluster.wait_drained(
            lambda: len(kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]),
            f"the pods of {NAMESPACE} to be gone",
            stall_timeout=STALL_TIMEOUT_S,
        )


# How long a removal may go without one more pod (or the namespace) gone before it
# counts as stuck; while they keep going, a busy machine gets all the time it needs.
STALL_TIMEOUT_S = 120.0


def wait_namespace_gone(kube: rest.Rest) -> None:
    """Wait (on progress) until NAMESPACE and its pods from an earlier install are gone."""

    def left() -> int:
        try:
            kube.get(f"/api/v1/namespaces/{NAMESPACE}")
        except rest.ApiError as err:
            if err.not_found:
                return 0
            raise
        return 1 + len(kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods")["items"])

    localcluster.wait_drained(
        left,
        f"namespace {NAMESPACE} from an earlier install to be gone",
        stall_timeout=STALL_TIMEOUT_S,
    )


def wait_or_describe(kube: rest.Rest, check: Any, what: str, timeout: float = 180) -> Any:
    try:
        return pods.wait_for(check, what, timeout=timeout)
    except AssertionError as err:
        raise AssertionError(f"{err}\n{describe(kube)}") from None


def test_agents_ready_on_every_node_and_publish_node_metrics(
    real_cluster: RealCluster, installed: str
) -> None:
    """The DaemonSet's agents (cluster mode) are Ready on every node, each reporting its NodeMetric."""
    kube = real_cluster.kube
    ns_pods = f"/api/v1/namespaces/{NAMESPACE}/pods"
    nodes = set(real_cluster.nodes)

    def agents() -> dict[str, dict[str, Any]] | None:
        found = {
            p["spec"]["nodeName"]: p
            for p in kube.get(ns_pods, labelSelector="app.kubernetes.io/name=nodeqos-agent")[
                "items"
            ]
            if ready(p)
        }
        return found if set(found) == nodes else None

    wait_or_describe(kube, agents, "a Ready agent on every node")

    def reported() -> dict[str, dict[str, Any]] | None:
        found = {}
        for name in nodes:
            try:
                metric = kube.get(f"/apis/{slo.API_VERSION}/nodemetrics/{name}")
            except rest.ApiError as err:
                if err.not_found:
                    return None
                raise
            status = metric.get("status") or {}
            usage = (status.get("nodeMetric") or {}).get("nodeUsage") or {}
            if not status.get("updateTime") or "cpu" not in usage.get("resources", {}):
                return None
            found[name] = status
        return found

    statuses = wait_or_describe(kube, reported, "a NodeMetric with node usage per node")
    for name, status in statuses.items():
        assert status["nodeMetric"]["nodeUsage"]["resources"]["memory"], (name, status)


def test_one_descheduler_replica_holds_the_lease(real_cluster: RealCluster, installed: str) -> None:
    """The Lease named in the shipped DeschedulerConfiguration is held by one of its pods."""
    kube = real_cluster.kube

    def leader() -> str | None:
        try:
            lease = kube.get(
                f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/nodeqos-descheduler"
            )
        except rest.ApiError as err:
            if err.not_found:
                return None
            raise
        holder: str | None = lease["spec"].get("holderIdentity")
        return holder

    holder = wait_or_describe(kube, leader, "a descheduler replica holding the Lease")
    deschedulers = kube.get(
        f"/api/v1/namespaces/{NAMESPACE}/pods",
        labelSelector="app.kubernetes.io/name=nodeqos-descheduler",
    )
    names = {p["metadata"]["name"] for p in deschedulers["items"]}
    # The identity is <hostname>_<pid>_<random>, and a pod's hostname is its name.
    assert holder.split("_")[0] in names, (holder, names)


def extender_requests(pod_ip: str, verb: str) -> float | None:
    """nodeqos_extender_requests_total{verb, outcome="ok"} from one extender's /metrics,
    None while it does not answer (two cores shared by everything: it may be slow)."""
    url = f"http://{pod_ip}:{EXTENDER_PORT}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=20) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if (
            line.startswith("nodeqos_extender_requests_total{")
            and f'verb="{verb}"' in line
            and 'outcome="ok"' in line
        ):
            return float(line.split()[-1])
    return 0.0


def extender_count(pod_ip: str, verb: str, *, above: float = -1.0) -> float:
    """The replica's count of `verb` calls once it answers and exceeds `above`."""

    def counted() -> float | None:
        value = extender_requests(pod_ip, verb)
        return value if value is not None and value > above else None

    result: float = pods.wait_for(
        lambda: (v := counted()) is not None and (v,),
        f"the extender at {pod_ip} to count more than {above} {verb} calls",
        timeout=120,
        interval=2,
    )[0]
    return result


def test_extender_serves_kube_scheduler(
    real_cluster: RealCluster, installed: str, e2e_namespace: str
) -> None:
    """kube-scheduler with deploy/kube-scheduler/extender.yaml asks the extender to place a pod.

    Its urlPrefix names the Service's DNS name; this host has neither cluster DNS
    nor kube-proxy, so (as the file's comment suggests for such hosts) the URL is
    replaced, here by one Ready replica's pod IP.
    """
    kube = real_cluster.kube

    def extenders() -> list[dict[str, Any]] | None:
        found = [
            p
            for p in kube.get(
                f"/api/v1/namespaces/{NAMESPACE}/pods",
                labelSelector="app.kubernetes.io/name=nodeqos-scheduler-extender",
            )["items"]
            if ready(p)
        ]
        return found if len(found) == 2 else None

    replica_ip = wait_or_describe(kube, extenders, "both scheduler extender replicas Ready")[0][
        "status"
    ]["podIP"]
    config = yaml.safe_load((DEPLOY / "kube-scheduler" / "extender.yaml").read_text())
    (extender,) = config["extenders"]
    extender["urlPrefix"] = f"http://{replica_ip}:{EXTENDER_PORT}"
    before = extender_count(replica_ip, "filter")
    real_cluster.plane.start_scheduler(config)
    try:
        ns_pods = f"/api/v1/namespaces/{e2e_namespace}/pods"
        kube.create(ns_pods, pods.pod("placed", cpu="100m"))

        # Placed, or refused: every node here reports the whole host's CPU (they
        # share one /proc), which under a loaded machine can exceed the shipped
        # usageThresholds; either way kube-scheduler has decided with the extender.
        def decided() -> dict[str, Any] | None:
            conditions = kube.get(f"{ns_pods}/placed")["status"].get("conditions", [])
            scheduled = [c for c in conditions if c["type"] == "PodScheduled"]
            return scheduled[0] if scheduled else None

        decision = pods.wait_for(decided, "kube-scheduler's decision on the pod", timeout=120)
        # Fails (timed out) if kube-scheduler decided without asking the extender.
        extender_count(replica_ip, "filter", above=before)
        # Refused only by the extender's usage thresholds ("... > threshold N percent").
        assert decision["status"] == "True" or "threshold" in decision.get("message", ""), decision
    finally:
        real_cluster.plane.start_scheduler(None)


AGENT_PORT = 9316
MANAGER_PORT = 10259
SUPPRESS = "nodeqos_agent_nodeslo_cpu_suppress_threshold_percent"
SLO_CONFIG = f"/api/v1/namespaces/{NAMESPACE}/configmaps/slo-controller-config"


def scrape(url: str, prefix: str) -> float | None:
    """The sum of the samples whose line starts with `prefix` at `url` (0 when none),
    None while it does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=20) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))


def test_configmap_change_reaches_every_agent(real_cluster: RealCluster, installed: str) -> None:
    """Both manager replicas Ready; a new cluster cpuSuppressThresholdPercent in
    slo-controller-config shows in every node's agent; the manager writes nothing
    while nothing changes."""
    kube = real_cluster.kube
    ns_pods = f"/api/v1/namespaces/{NAMESPACE}/pods"
    nodes = set(real_cluster.nodes)

    def by_label(name: str) -> list[dict[str, Any]]:
        return [
            p
            for p in kube.get(ns_pods, labelSelector=f"app.kubernetes.io/name={name}")["items"]
            if ready(p)
        ]

    managers = wait_or_describe(
        kube, lambda: (m := by_label("nodeqos-manager")) and len(m) == 2 and m, "2 Ready managers"
    )

    def agents_everywhere() -> dict[str, dict[str, Any]] | None:
        found = {p["spec"]["nodeName"]: p for p in by_label("nodeqos-agent")}
        return found if set(found) == nodes else None

    agents = wait_or_describe(kube, agents_everywhere, "a Ready agent on every node")
    urls = {n: f"http://{p['status']['podIP']}:{AGENT_PORT}/metrics" for n, p in agents.items()}

    # Every agent on the shipped policy first (its NodeSLO from the manager).
    config = kube.get(SLO_CONFIG)
    thresholds = json.loads(config["data"]["resource-threshold-config"])
    shipped = thresholds["clusterStrategy"]["cpuSuppressThresholdPercent"]
    wait_or_describe(
        kube,
        lambda: all(scrape(u, f"{SUPPRESS} ") == shipped for u in urls.values()),
        f"every agent at the shipped threshold {shipped}",
    )

    # Nothing changes: the manager's writes stay flat (summed over both replicas).
    manager_urls = [f"http://{p['status']['podIP']}:{MANAGER_PORT}/metrics" for p in managers]

    def writes() -> float | None:
        counts = [scrape(u, "nodeqos_manager_writes_total") for u in manager_urls]
        return None if None in counts else sum(c for c in counts if c is not None)

    before = pods.wait_for(lambda: (w := writes()) is not None and (w,), "manager metrics")[0]
    flat_until = time.monotonic() + 15
    while time.monotonic() < flat_until:
        assert writes() in (before, None), "the manager wrote while nothing changed"
        time.sleep(1)

    changed = shipped - 7
    thresholds["clusterStrategy"]["cpuSuppressThresholdPercent"] = changed
    started = time.monotonic()
    kube.patch(SLO_CONFIG, {"data": {"resource-threshold-config": json.dumps(thresholds)}})
    reached: dict[str, float] = {}

    def all_reached() -> bool:
        for node, url in urls.items():
            if node not in reached and scrape(url, f"{SUPPRESS} ") == changed:
                reached[node] = time.monotonic() - started
        return set(reached) == nodes

    # One reconcile (the change triggers it) plus the agent's informer delay: seconds.
    wait_or_describe(kube, all_reached, f"every agent at the new threshold {changed}", timeout=60)
    delay = max(reached.values())
    print(
        f"\n[{installed}] slo-controller-config change reached all {len(nodes)} agents in "
        f"{delay:.2f}s (per node: { {n: round(s, 2) for n, s in sorted(reached.items())} })"
    )
