"""The placement loop on real nodes: a hot node, and nodeqos moving its load away.

Shared by the e2e test (tests/e2e/test_placement.py) and `make demo` in its
real-node mode; both run it on three `testbed.localnodes` nodes (real kubelets and
containerds) beside a `testbed.controlplane.ControlPlane` with kube-scheduler and
kube-controller-manager. Nothing here plays a Kubernetes part:

1. `installed`: deploy/ applied as a user applies it, with an overlay for three
   nodes on one machine: the image, the agent told its kubelet's cgroup root and
   ``--node-usage-source=kubepods`` (the nodes share one /proc, so only each
   node's kubepods cgroup tells them apart), a per-node metric cache dir, the
   descheduler every 10 s with thresholds for two shared cores, the extender's
   CPU threshold below the descheduler's high mark; NodeMetrics created first
   with a 30 s report of the last 20 s. kube-scheduler is pointed at an extender
   replica's pod IP (no cluster DNS or kube-proxy here) once the workloads run.
2. `run`: with n2 and n3 cordoned, Deployments `web` (idle, under a PDB,
   minAvailable 1), `batch`, `report` and `export` (busy loops) start on n1;
   the others are uncordoned.
   The agents report n1 hot; the descheduler's LowNodeLoad evicts through the
   Eviction API (the PDB keeps web); the kubelet stops the pods; the ReplicaSet
   controller recreates them; kube-scheduler, asking the extender, binds them to
   n2 and n3; n1's next NodeMetric whose window starts after the evicted pods
   were gone shows it cool. `testbed.placementwatch` follows it into an `Outcome`;
   `say` narrates it.

Thresholds are percentages of a node's allocatable CPU (the host's two cores),
and low: the three nodes share those two cores with everything else on the
machine (measured on a busy machine: n1's pods got 420-640m of the 1000m they
asked). Each busy pod is held to 150m, which they get even then, so the
numbers below do not depend on the machine's load:

| workload | requests / limit | does | runs on |
|----------|------------------|------|---------|
| web      | 900m / 1000m (PDB minAvailable 1) | sleeps | n1 |
| batch, report, export | 100m / 150m | a busy loop | n1 |

n1 uses about 23 % (three busy pods), above LowNodeLoad's 12 % high mark;
a cool node (under 1 %) plus one moved pod (7.5 %) stays below it, which is
what LowNodeLoad asks of a destination; n1 is below the mark again once one
or two busy pods are gone. web goes first in LowNodeLoad's order (its
`pod-deletion-cost` is lower), so it is the PDB that keeps it; its large
request makes n1 the fullest node by requests. The extender refuses nodes
above 10 %: a cool node takes one replacement (its estimate: 85 % of 150m,
6.4 %), the next goes elsewhere, and n1 with a busy pod left is refused.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kube import rest
from testbed import controlplane, localcluster, placementwatch

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
SYSTEM_NAMESPACE = "nodeqos-system"
NAMESPACE = "placement"
NODES = ("n1", "n2", "n3")
HOT = "n1"
HIGH_CPU, LOW_CPU = 12, 6  # LowNodeLoad, percent of allocatable
EXTENDER_CPU = 10  # the extender refuses nodes above this (below HIGH_CPU)
PLACEHOLDER = "NODEQOS_IMAGE"
EXTENDER_PORT = 10262
BUSYBOX_IMAGE = "nodeqos.local/busybox:1"  # testbed.localnodes imports it into every node
WINDOW_SECONDS = 20
NODEMETRIC_SPEC = {
    "metricCollectPolicy": {
        # Report every 30 s (the agent's minimum), averaging the last 20 s: a move
        # shows within one report instead of five minutes.
        "aggregateDurationSeconds": WINDOW_SECONDS,
        "reportIntervalSeconds": 30,
        "nodeAggregatePolicy": {"durations": ["1m0s", "5m0s"]},
        "nodeMemoryCollectPolicy": "usageWithoutPageCache",
    }
}
NODEMETRICS = localcluster.NODEMETRICS

Say = placementwatch.Say


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    request_millicores: int
    limit_millicores: int
    busy: bool = True
    pdb: bool = False


WORKLOADS = (
    Workload("web", 900, 1000, busy=False, pdb=True),
    Workload("batch", 100, 150),
    Workload("report", 100, 150),
    Workload("export", 100, 150),
)
# LowNodeLoad tries lower costs first (Koordinator's pod sorter): the PDB's pod goes first.
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


# -- the overlay ---------------------------------------------------------------------


def one_host_manifests(image: str, state_dir: Path) -> list[dict[str, Any]]:
    """deploy/*.yaml as several kubelets on one host must run it: `image` in place
    of the placeholder, and each node's agent its own cgroup root and cache directory
    (under `state_dir`). Nothing else differs from what users apply."""
    docs = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        for raw in yaml.safe_load_all(path.read_text()):
            if not raw:
                continue
            doc = copy.deepcopy(raw)
            if doc["kind"] in ("DaemonSet", "Deployment"):
                for container in doc["spec"]["template"]["spec"]["containers"]:
                    if container["image"] != PLACEHOLDER:
                        raise ValueError(
                            f"{path.name}: container {container['name']} has image "
                            f"{container['image']!r}; deploy/ ships {PLACEHOLDER}"
                        )
                    container["image"] = image
            if doc["kind"] == "DaemonSet":
                _patch_agent(doc, state_dir)
            docs.append(doc)
    return docs


def _patch_agent(daemonset: dict[str, Any], state_dir: Path) -> None:
    spec = daemonset["spec"]["template"]["spec"]
    (agent,) = spec["containers"]
    agent["args"].append("--kubelet-cgroup-root=/nodeqos-$(NODE_NAME)")
    for mount in agent["volumeMounts"]:
        if mount["name"] == "state":  # three agents, one host: one cache dir each
            mount["subPathExpr"] = "$(NODE_NAME)"
    for volume in spec["volumes"]:
        if volume["name"] == "state":
            volume["hostPath"]["path"] = str(state_dir)


def manifests(image: str, state_dir: Path) -> list[dict[str, Any]]:
    """`one_host_manifests` with this scenario's overlay: each agent measures its node
    as its kubelet's pods (three nodes share one machine's /proc), and the descheduler's
    and the extender's thresholds suit two shared cores."""
    docs = one_host_manifests(image, state_dir)
    for doc in docs:
        if doc["kind"] == "DaemonSet":
            (agent,) = doc["spec"]["template"]["spec"]["containers"]
            agent["args"].append("--node-usage-source=kubepods")
        elif doc["kind"] == "ConfigMap" and "descheduler.yaml" in doc["data"]:
            doc["data"]["descheduler.yaml"] = yaml.safe_dump(
                descheduler_config(yaml.safe_load(doc["data"]["descheduler.yaml"]))
            )
        elif doc["kind"] == "ConfigMap" and "loadaware.yaml" in doc["data"]:
            args = yaml.safe_load(doc["data"]["loadaware.yaml"])
            args["usageThresholds"] = {**args["usageThresholds"], "cpu": EXTENDER_CPU}
            doc["data"]["loadaware.yaml"] = yaml.safe_dump(args)
    return docs


def descheduler_config(shipped: Mapping[str, Any]) -> dict[str, Any]:
    """The shipped DeschedulerConfiguration, every 10 s, with thresholds for two shared cores."""
    config = copy.deepcopy(dict(shipped))
    config["deschedulingInterval"] = "10s"
    config["evictionFailureEventNotification"] = True  # a refused eviction is an Event too
    for entry in config["profiles"][0]["pluginConfig"]:
        if entry["name"] == "LowNodeLoad":
            entry["args"].update(
                lowThresholds={"cpu": LOW_CPU, "memory": 55},
                highThresholds={"cpu": HIGH_CPU, "memory": 80},
                anomalyCondition={"consecutiveAbnormalities": 1},
            )
    return config


def scheduler_config(extender_ip: str) -> dict[str, Any]:
    """deploy/kube-scheduler/extender.yaml, its URL a replica's pod IP (no cluster DNS here)."""
    config: dict[str, Any] = yaml.safe_load(
        (DEPLOY / "kube-scheduler" / "extender.yaml").read_text()
    )
    (extender,) = config["extenders"]
    extender["urlPrefix"] = f"http://{extender_ip}:{EXTENDER_PORT}"
    return config


# -- install -----------------------------------------------------------------------------


# How long removing an install may go without one more pod (or the namespace) gone
# before it counts as stuck; while they keep going, a busy machine gets all it needs.
STALL_TIMEOUT_S = 120.0


def deployed(
    kube: rest.Rest, plane: controlplane.ControlPlane, docs: Sequence[Mapping[str, Any]]
) -> contextlib.AbstractContextManager[None]:
    """`localcluster.deployed` on this scenario's nodes: nodeqos-system, the NodeMetric
    spec above, deploy/crds (the colocation loop installs through it too)."""
    return localcluster.deployed(
        kube,
        plane,
        docs,
        namespace=SYSTEM_NAMESPACE,
        nodes=NODES,
        nodemetric_spec=NODEMETRIC_SPEC,
        crds=DEPLOY / "crds",
        stall_timeout=STALL_TIMEOUT_S,
    )


@contextlib.contextmanager
def installed(
    kube: rest.Rest, plane: controlplane.ControlPlane, image: str, state_dir: Path, say: Say
) -> Iterator[str]:
    """deploy/ with the overlay, agents Ready everywhere; yields a Ready extender replica's
    pod IP. Everything is removed (and kube-scheduler back to its defaults) on exit."""
    with deployed(kube, plane, manifests(image, state_dir)):
        say(
            "applied deploy/ with the overlay: agents --node-usage-source=kubepods, "
            f"descheduler every 10s (LowNodeLoad cpu low {LOW_CPU}% / high {HIGH_CPU}%), "
            f"extender cpu threshold {EXTENDER_CPU}%"
        )
        try:
            yield _wait_installed(kube, say)
        finally:
            plane.start_scheduler(None)


def _wait_installed(kube: rest.Rest, say: Say) -> str:
    started = time.monotonic()

    def ready_on_every_node() -> bool:
        agents = placementwatch.pods(kube, SYSTEM_NAMESPACE, "app.kubernetes.io/name=nodeqos-agent")
        return {p["spec"].get("nodeName") for p in agents if placementwatch.ready(p)} >= set(NODES)

    localcluster.wait_for(ready_on_every_node, "a Ready nodeqos-agent on every node", timeout=180)

    def extender_ip() -> str | None:
        found = placementwatch.pods(
            kube, SYSTEM_NAMESPACE, "app.kubernetes.io/name=nodeqos-scheduler-extender"
        )
        ips = [str(p["status"]["podIP"]) for p in found if placementwatch.ready(p)]
        return ips[0] if ips else None

    ip: str = localcluster.wait_for(
        extender_ip, "a Ready nodeqos-scheduler-extender replica", timeout=180
    )
    localcluster.wait_for(
        functools.partial(_settled, kube),
        "a NodeMetric of every node covering the nodeqos pods it runs",
        timeout=240,
        interval=2.0,
    )
    say(
        f"agents Ready on {', '.join(NODES)}, descheduler and extender running, nodes settled "
        f"({time.monotonic() - started:.0f}s)"
    )
    return ip


def _settled(kube: rest.Rest) -> bool:
    """Every node's NodeMetric reports a window that starts after the nodeqos pods on it
    were scheduled. Until then the extender estimates those pods from their requests and
    limits (LoadAware: a pod scheduled within the last report interval is not yet in the
    usage), which puts a destination holding a just-started extender replica (2 cores of
    limit) over the scenario's 10% threshold; kube-scheduler does not retry a pod it found
    unschedulable on a NodeMetric update, so a replacement refused then waits 5 minutes."""
    metrics = {m["metadata"]["name"]: m for m in kube.get(placementwatch.NODEMETRICS)["items"]}
    for pod in placementwatch.pods(kube, SYSTEM_NAMESPACE):
        node = pod["spec"].get("nodeName")
        if node not in NODES:
            continue
        metric = metrics.get(node) or {}
        stamp = (metric.get("status") or {}).get("updateTime")
        policy = (metric.get("spec") or {}).get("metricCollectPolicy") or {}
        interval = float(policy.get("reportIntervalSeconds") or 60)
        scheduled = next(
            (
                c.get("lastTransitionTime")
                for c in pod["status"].get("conditions", [])
                if c["type"] == "PodScheduled" and c["status"] == "True"
            ),
            None,
        )
        if not stamp or not scheduled:
            return False
        if placementwatch.parse_time(stamp) - interval <= placementwatch.parse_time(scheduled):
            return False
    return True


# -- the scenario ----------------------------------------------------------------------


def deployment(workload: Workload) -> dict[str, Any]:
    """A one-replica Deployment: a busy loop held to the workload's limit, or a sleep."""
    resources = {
        "requests": {"cpu": f"{workload.request_millicores}m", "memory": "32Mi"},
        "limits": {"cpu": f"{workload.limit_millicores}m", "memory": "32Mi"},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": workload.name, "namespace": NAMESPACE},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": workload.name}},
            "template": {
                "metadata": {
                    "labels": {"app": workload.name},
                    "annotations": {DELETION_COST: "-1" if workload.pdb else "0"},
                },
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": BUSYBOX_IMAGE,
                            "imagePullPolicy": "Never",
                            "command": [
                                "sh",
                                "-c",
                                "while :; do :; done" if workload.busy else "sleep 100000",
                            ],
                            "resources": resources,
                        }
                    ],
                    "terminationGracePeriodSeconds": 1,
                    "automountServiceAccountToken": False,
                },
            },
        },
    }


def _cordon(kube: rest.Rest, node: str, unschedulable: bool) -> None:
    kube.patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": unschedulable}})


def start_workloads(kube: rest.Rest, say: Say) -> set[str]:
    """The namespace, the PDB and the Deployments, every pod Running on the hot node;
    returns the uids of those pods."""
    kube.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    localcluster.wait_namespace_ready(kube, NAMESPACE)
    for workload in WORKLOADS:
        if workload.pdb:
            kube.create(
                rest.object_path("policy", "v1", "poddisruptionbudgets", namespace=NAMESPACE),
                {
                    "metadata": {"name": workload.name, "namespace": NAMESPACE},
                    "spec": {
                        "minAvailable": 1,
                        "selector": {"matchLabels": {"app": workload.name}},
                    },
                },
            )
    others = [n for n in NODES if n != HOT]
    for node in others:  # as when n1 was the first node to join: everything lands there
        _cordon(kube, node, True)
    try:
        for workload in WORKLOADS:
            localcluster.apply(kube, deployment(workload))

        def running() -> list[dict[str, Any]] | None:
            pods = [p for p in placementwatch.pods(kube, NAMESPACE) if placementwatch.ready(p)]
            return pods if len(pods) == len(WORKLOADS) else None

        pods = localcluster.wait_for(
            running, f"{len(WORKLOADS)} busy pods Running on {HOT}", timeout=120
        )
    finally:
        for node in others:
            _cordon(kube, node, False)
    say(
        f"{HOT} runs {', '.join(w.name for w in WORKLOADS)} (busy: "
        f"{', '.join(w.name for w in WORKLOADS if w.busy)}; PDB web minAvailable=1), "
        f"started while {' and '.join(others)} were cordoned; all nodes schedulable now"
    )
    return {p["metadata"]["uid"] for p in pods}


def run(
    kube: rest.Rest,
    plane: controlplane.ControlPlane,
    extender_ip: str,
    say: Say,
    *,
    timeout: float = 240.0,
) -> placementwatch.Outcome:
    """Start the workloads on the hot node (kube-scheduler as it is: the extender would
    rightly refuse to make a node hot), then point kube-scheduler at the extender and
    watch the loop until the hot node cooled (or `timeout`)."""
    started = time.monotonic()
    try:
        initial = start_workloads(kube, say)
        plane.start_scheduler(scheduler_config(extender_ip))
        say(
            f"kube-scheduler restarted with the nodeqos extender at {extender_ip} (filter + prioritize)"
        )
        watch = placementwatch.Watch(
            kube,
            placementwatch.Scene(NAMESPACE, NODES, HOT, HIGH_CPU, WINDOW_SECONDS),
            initial,
            say,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not watch.done():
            watch.poll()
            time.sleep(1.0)
        outcome = watch.outcome
        pdb_apps = {w.name for w in WORKLOADS if w.pdb}
        outcome.kept = sorted(
            p["metadata"]["name"]
            for p in placementwatch.pods(kube, NAMESPACE)
            if p["metadata"]["uid"] in initial
            and p["spec"].get("nodeName") == HOT
            and p["metadata"]["labels"].get("app") in pdb_apps
            and placementwatch.ready(p)
        )
        outcome.seconds = round(time.monotonic() - started, 1)
        return outcome
    finally:
        localcluster.delete_path(kube, f"/api/v1/namespaces/{NAMESPACE}")
        localcluster.wait_for(
            lambda: not localcluster.exists(kube, f"/api/v1/namespaces/{NAMESPACE}"),
            f"namespace {NAMESPACE} to be gone",
            timeout=120,
        )
