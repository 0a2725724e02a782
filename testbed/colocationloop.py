"""Colocation on real nodes: measured slack becomes Batch capacity, and the node keeps it safe.

Shared by the e2e test (tests/e2e/test_colocation.py) and `make demo`'s colocation
scenario (hack/demo, `--scenario colocation`); both run it on the three
`testbed.localnodes` nodes beside a `testbed.controlplane.ControlPlane` with
kube-scheduler and kube-controller-manager (the Job controller included). Nothing
here plays a Kubernetes part. Imports `kube` and `testbed` only.

1. `installed`: deploy/ applied as `testbed.placementloop.one_host_manifests`
   applies it, with this overlay: the agents measure each node as its kubelet's
   pods (``--node-usage-source=kubepods``) and stay off a node labelled
   ``nodeqos.demo/agent=off``; `slo-controller-config` turns colocation on
   (report every 30 s over the last 20 s, `updateTimeThresholdSeconds` 30,
   `degradeTimeMinutes` 1, and a `nodeConfigs` entry capping batch-cpu at 5 % on
   nodes labelled ``nodeqos.demo/batch=small``) and BE CPU suppression
   (`cfsQuota`, 15 %); the descheduler and the extender are left out (kube-scheduler
   places by requests and Batch allocatable here). A ClusterColocationProfile
   makes the pods labelled ``role=batch`` of namespaces labelled ``colocation=on``
   BE with Koordinator's `koord-batch` PriorityClass (5000, created here); the
   manager renders it as a MutatingAdmissionPolicy.
2. `run`, step "capacity": online workloads that request 600m, one per node:
   on n1 a real web server (`testbed.onlineserver`: nginx, idle between loads), on
   n2 and n3 Deployments that sleep; each node's `kubernetes.io/batch-cpu` printed
   as the manager writes it (n3 is the small one). The server's tail latency under
   vegeta's constant `SERVER_RATE` for `SERVER_SECONDS` is measured alone here and
   again with the batch pods running, with n1's CPU from its cgroup root. Step "placement": a Job whose pods ask plain `cpu` (300m each) in
   the colocation namespace; the API server turns them into batch-cpu; kube-scheduler
   places them where Batch capacity is (never n3). Cluster CPU before and after,
   from the NodeMetrics.
3. Step "pressure": an online Deployment on n1 starts burning CPU. n1's batch-cpu
   shrinks; BE suppression lowers n1's besteffort cfs quota and the BE pods'
   usage in the NodeMetric drops; the online pods' CFS throttling (their pod
   cgroups' cpu.stat on the host) does not grow.
4. Step "degrade": n2 labelled ``nodeqos.demo/agent=off``, so the DaemonSet
   controller removes its agent; once n2's NodeMetric is older than
   `degradeTimeMinutes` the manager sets its batch-cpu and batch-memory to 0 and
   emits the Warning Event `BatchResourceDegraded`.

Two shared cores carry the three nodes and whatever else runs on the machine:
every wait is a condition with a deadline, and the checks are directions
(shrinks, drops, zero, does not grow), never tight values.
"""

from __future__ import annotations

import contextlib
import functools
import json
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kube import quantity, rest
from testbed import (
    controlplane,
    localcluster,
    onlineserver,
    placementloop,
    placementwatch,
    vegeta,
)

SYSTEM_NAMESPACE = placementloop.SYSTEM_NAMESPACE
ONLINE_NAMESPACE = "colo-online"
BATCH_NAMESPACE = "colo-batch"
NODES = placementloop.NODES
PRESSED = "n1"  # whose online load rises
SERVER_NODE = PRESSED  # where the online web server runs (it gets batch pods too)
SERVER_RATE = 200  # requests/s of the 16 KiB gzipped page: a few % of a core
SERVER_SECONDS = 10.0
SMALL = "n3"  # whose Batch capacity is capped too small for a batch pod
STOPPED = "n2"  # whose agent is stopped
AGENT_LABEL = "nodeqos.demo/agent"
SMALL_LABEL = "nodeqos.demo/batch"
BUSYBOX_IMAGE = placementloop.BUSYBOX_IMAGE
REPORT_SECONDS, WINDOW_SECONDS = 30, 20
UPDATE_SECONDS = 30
DEGRADE_MINUTES = 1
RECLAIM_PERCENT = 60
SMALL_BATCH_PERCENT = 5  # of n3's capacity: below one batch pod's request
# BE suppression's share of a node: the BE budget is 15 % of 2000m minus the online
# pods' usage, ~300m per node. Busy BE pods under a node root with the maximum
# shares (testbed.localnodes) would otherwise take both cores from the API server
# (a first run at 65 % starved it into 30 s read timeouts at load 45).
SUPPRESS_PERCENT = 15
ONLINE_REQUEST_MILLIS = 600
BATCH_REQUEST_MILLIS = 300
BATCH_PODS = 4
BURST_PODS = 1  # one busy thread: about a core of n1
# The burst asks little, so that what n1's batch-cpu loses beyond this request can
# only come from its measured usage (a new pod counts by its request until reported).
BURST_REQUEST_MILLIS = 100
# batch-cpu must fall by this much more than the burst's request: only the reported
# usage of a busy thread (several hundred millicores, even on a loaded machine) does it
USAGE_MARGIN_MILLIS = 200
SHRINK_MILLIS = BURST_PODS * BURST_REQUEST_MILLIS + USAGE_MARGIN_MILLIS
PROFILE = "colocation-demo"
PRIORITY_CLASS = "koord-batch"  # Koordinator's batch PriorityClass and value
PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
BATCH_CPU = "kubernetes.io/batch-cpu"
BATCH_MEMORY = "kubernetes.io/batch-memory"
MID_CPU = "kubernetes.io/mid-cpu"
MID_MEMORY = "kubernetes.io/mid-memory"
EXTENDED_RESOURCES = (BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY)
DEGRADED_REASON = "BatchResourceDegraded"  # manager.batchresource's Event reason
CGROUP_CPU = Path("/sys/fs/cgroup/cpu")  # cgroup v1, as testbed.localnodes requires
NODEMETRICS = placementloop.NODEMETRICS
PROFILES = rest.object_path("config.koordinator.sh", "v1alpha1", "clustercolocationprofiles")
DAEMONSET = rest.object_path(
    "apps", "v1", "daemonsets", "nodeqos-agent", namespace=SYSTEM_NAMESPACE
)

Say = Callable[[str], None]


# -- the overlay ---------------------------------------------------------------------


def colocation_config() -> dict[str, Any]:
    """`colocation-config`: on, with intervals that make the scenario minutes long."""
    return {
        "enable": True,
        "cpuReclaimThresholdPercent": RECLAIM_PERCENT,
        "memoryReclaimThresholdPercent": 65,
        "degradeTimeMinutes": DEGRADE_MINUTES,
        "updateTimeThresholdSeconds": UPDATE_SECONDS,
        "resourceDiffThreshold": 0.1,
        "metricAggregateDurationSeconds": WINDOW_SECONDS,
        "metricReportIntervalSeconds": REPORT_SECONDS,
        "metricAggregatePolicy": {"durations": ["1m", "5m"]},
        "metricMemoryCollectPolicy": "usageWithoutPageCache",
        "nodeConfigs": [
            {
                "name": "small-batch",
                "nodeSelector": {"matchLabels": {SMALL_LABEL: "small"}},
                "batchCPUThresholdPercent": SMALL_BATCH_PERCENT,
            }
        ],
    }


def threshold_config() -> dict[str, Any]:
    """`resource-threshold-config`: BE CPU suppression by cfs quota."""
    return {
        "clusterStrategy": {
            "enable": True,
            "cpuSuppressThresholdPercent": SUPPRESS_PERCENT,
            "cpuSuppressPolicy": "cfsQuota",
            "memoryEvictThresholdPercent": 90,
        }
    }


def manifests(
    image: str,
    state_dir: Path,
    *,
    agent_args: Sequence[str] = (),
    thresholds: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """deploy/ for one host (placementloop.one_host_manifests) with the colocation overlay;
    `agent_args` appended to the agent's, `thresholds` instead of `threshold_config()`
    (the Mid scenario of tests/e2e/test_mid.py shortens the predictor's cold start and
    turns BE suppression off, which would unset the Mid pods' quotas too)."""
    docs = []
    for doc in placementloop.one_host_manifests(image, state_dir):
        name = doc["metadata"]["name"]
        if doc["kind"] == "Deployment" and name != "nodeqos-manager":
            continue  # no descheduler, no extender: kube-scheduler alone places here
        if doc["kind"] == "Service" and "extender" in name:
            continue
        if doc["kind"] == "DaemonSet":
            spec = doc["spec"]["template"]["spec"]
            (agent,) = spec["containers"]
            agent["args"].append("--node-usage-source=kubepods")
            agent["args"].extend(agent_args)
            spec["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": AGENT_LABEL, "operator": "NotIn", "values": ["off"]}
                                ]
                            }
                        ]
                    }
                }
            }
        elif doc["kind"] == "Deployment":
            doc["spec"]["replicas"] = 1  # the manager: one replica is enough here
        elif doc["kind"] == "ConfigMap" and name == "slo-controller-config":
            doc["data"]["colocation-config"] = json.dumps(colocation_config(), indent=2)
            doc["data"]["resource-threshold-config"] = json.dumps(
                threshold_config() if thresholds is None else dict(thresholds), indent=2
            )
        docs.append(doc)
    return docs


def profile() -> dict[str, Any]:
    """The ClusterColocationProfile: every pod of a `colocation=on` namespace becomes BE."""
    return {
        "apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile",
        "metadata": {"name": PROFILE},
        "spec": {
            "namespaceSelector": {"matchLabels": {"colocation": "on"}},
            "selector": {"matchLabels": {"role": "batch"}},
            "qosClass": "BE",
            "priorityClassName": PRIORITY_CLASS,
            "labels": {"colocated-by": "nodeqos"},
        },
    }


# -- reading the cluster -------------------------------------------------------------


def batch_allocatable(kube: rest.Rest) -> dict[str, tuple[int, int] | None]:
    """Each node's (batch-cpu millicores, batch-memory bytes), None while unpublished."""
    found: dict[str, tuple[int, int] | None] = {}
    for node in kube.get("/api/v1/nodes")["items"]:
        allocatable = node["status"].get("allocatable", {})
        name = node["metadata"]["name"]
        if name not in NODES:
            continue
        if BATCH_CPU in allocatable and BATCH_MEMORY in allocatable:
            found[name] = (
                quantity.quantity_value(allocatable[BATCH_CPU]),
                quantity.memory_bytes(allocatable[BATCH_MEMORY]),
            )
        else:
            found[name] = None
    return found


def capacity_millis(kube: rest.Rest) -> dict[str, int]:
    return {
        n["metadata"]["name"]: quantity.cpu_millis(n["status"]["capacity"]["cpu"])
        for n in kube.get("/api/v1/nodes")["items"]
        if n["metadata"]["name"] in NODES
    }


def nodemetrics(kube: rest.Rest) -> dict[str, dict[str, Any]]:
    return {
        m["metadata"]["name"]: m
        for m in kube.get(NODEMETRICS)["items"]
        if m["metadata"]["name"] in NODES
    }


def update_time(metric: Mapping[str, Any]) -> float | None:
    stamp = (metric.get("status") or {}).get("updateTime")
    return placementwatch.parse_time(stamp) if stamp else None


def node_usage_millis(metric: Mapping[str, Any]) -> int | None:
    usage = ((metric.get("status") or {}).get("nodeMetric") or {}).get("nodeUsage") or {}
    cpu = (usage.get("resources") or {}).get("cpu")
    return None if cpu is None else quantity.cpu_millis(cpu)


def pods_usage_millis(metric: Mapping[str, Any], namespace: str) -> int:
    """The summed CPU of the NodeMetric's pods of `namespace`."""
    total = 0
    for pod in (metric.get("status") or {}).get("podsMetric") or []:
        if pod.get("namespace") == namespace:
            cpu = ((pod.get("podUsage") or {}).get("resources") or {}).get("cpu")
            total += quantity.cpu_millis(cpu) if cpu is not None else 0
    return total


def cluster_cpu_percent(kube: rest.Rest, capacity: Mapping[str, int]) -> float | None:
    """Σ node usage / Σ node capacity, from the NodeMetrics (None until all reported)."""
    used = [node_usage_millis(m) for m in nodemetrics(kube).values()]
    if len(used) != len(NODES) or any(u is None for u in used):
        return None
    return sum(u or 0 for u in used) / sum(capacity.values()) * 100


def wait_for(check: Callable[[], Any], what: str, *, timeout: float) -> Any:
    """localcluster.wait_for, an API server too busy to answer counting as "not yet"."""

    def tolerant() -> Any:
        try:
            return check()
        except rest.ApiUnavailable:
            return None

    return localcluster.wait_for(tolerant, what, timeout=timeout)


def wait_report_after(
    kube: rest.Rest, node: str, since: float, *, timeout: float
) -> dict[str, Any]:
    """`node`'s first NodeMetric whose averaging window starts after `since` (epoch s)."""

    def fresh() -> dict[str, Any] | None:
        metric = nodemetrics(kube).get(node)
        stamp = update_time(metric) if metric else None
        if metric and stamp is not None and stamp - WINDOW_SECONDS >= since:
            return metric
        return None

    found: dict[str, Any] = wait_for(
        fresh,
        f"a NodeMetric report of {node} after {time.strftime('%X', time.gmtime(since))}",
        timeout=timeout,
    )
    return found


def pod_cgroup(node: str, uid: str) -> Path | None:
    """The pod's cgroup v1 cpu directory on the host (kubelet's cgroupfs driver)."""
    kubepods = CGROUP_CPU / f"nodeqos-{node}" / "kubepods"
    for parent in (kubepods / "burstable", kubepods / "besteffort", kubepods):
        candidate = parent / f"pod{uid}"
        if candidate.is_dir():
            return candidate
    return None


def nr_throttled(directory: Path) -> int:
    """`nr_throttled` of a cgroup v1 cpu.stat (0 when the cgroup is gone)."""
    try:
        text = (directory / "cpu.stat").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "nr_throttled":
            return int(value)
    return 0


def besteffort_quota_us(node: str) -> int | None:
    """The node's kubepods/besteffort cfs quota (µs; -1 unlimited), None when unreadable."""
    try:
        text = (
            CGROUP_CPU / f"nodeqos-{node}" / "kubepods" / "besteffort" / "cpu.cfs_quota_us"
        ).read_text()
    except OSError:
        return None
    return int(text.strip())


def _running(kube: rest.Rest, namespace: str, selector: str) -> list[dict[str, Any]]:
    return [p for p in placementwatch.pods(kube, namespace, selector) if placementwatch.ready(p)]


# -- install -------------------------------------------------------------------------


@contextlib.contextmanager
def installed(
    kube: rest.Rest,
    plane: controlplane.ControlPlane,
    image: str,
    state_dir: Path,
    say: Say,
    *,
    agent_args: Sequence[str] = (),
    thresholds: Mapping[str, Any] | None = None,
) -> Iterator[str]:
    """deploy/ with the colocation overlay (`manifests`' options), agents Ready on every node,
    the manager Ready, the profile rendered. Everything (and the batch and mid resources on
    the Nodes) removed on exit."""
    started = time.monotonic()
    try:
        kube.patch(f"/api/v1/nodes/{SMALL}", {"metadata": {"labels": {SMALL_LABEL: "small"}}})
        with placementloop.deployed(
            kube, plane, manifests(image, state_dir, agent_args=agent_args, thresholds=thresholds)
        ):
            try:
                _add_profile(kube)
                say(
                    "applied deploy/ with the colocation overlay: colocation-config enable, "
                    f"cpuReclaimThresholdPercent {RECLAIM_PERCENT}, report every "
                    f"{REPORT_SECONDS}s, updateTimeThresholdSeconds {UPDATE_SECONDS}, "
                    f"degradeTimeMinutes {DEGRADE_MINUTES}, {SMALL} capped at "
                    f"batchCPUThresholdPercent {SMALL_BATCH_PERCENT}; "
                    + (
                        f"BE suppression cfsQuota at {SUPPRESS_PERCENT}%"
                        if thresholds is None
                        else f"resource-threshold-config {json.dumps(thresholds)}"
                    )
                    + (f"; agent {' '.join(agent_args)}" if agent_args else "")
                    + f"; ClusterColocationProfile {PROFILE} "
                    "(namespaces colocation=on, pods role=batch → BE)"
                )
                path = _wait_installed(kube)
                say(
                    f"agents Ready on {', '.join(NODES)}, nodeqos-manager Ready, profile "
                    f"{PROFILE} applied by {path} ({time.monotonic() - started:.0f}s)"
                )
                yield path
            finally:
                localcluster.delete_path(kube, f"{PROFILES}/{PROFILE}")
                localcluster.delete_path(kube, f"{PRIORITY_CLASSES}/{PRIORITY_CLASS}")
    finally:
        for kind in ("mutatingadmissionpolicybindings", "mutatingadmissionpolicies"):
            localcluster.delete_path(kube, _rendered(kind))
        localcluster.delete_path(kube, PROFILES_WEBHOOK)
        for node in NODES:
            _reset_node(kube, node)


def _rendered(kind: str, profile: str = PROFILE) -> str:
    """The path of a profile's MutatingAdmissionPolicy (or binding) the manager renders."""
    return rest.object_path(
        "admissionregistration.k8s.io", "v1", kind, f"nodeqos-colocation-{profile}"
    )


def _add_profile(kube: rest.Rest) -> None:
    """Koordinator's batch PriorityClass and the demo's ClusterColocationProfile."""
    localcluster.delete_path(kube, f"{PRIORITY_CLASSES}/{PRIORITY_CLASS}")
    kube.create(
        PRIORITY_CLASSES,
        {"metadata": {"name": PRIORITY_CLASS}, "value": 5000, "preemptionPolicy": "Never"},
    )
    kube.create(PROFILES, profile())


def _wait_installed(kube: rest.Rest) -> str:
    """Agents Ready on every node, the manager Ready, the profile in force; by which path."""

    def agents_ready() -> bool:
        agents = _running(kube, SYSTEM_NAMESPACE, "app.kubernetes.io/name=nodeqos-agent")
        return {p["spec"].get("nodeName") for p in agents} >= set(NODES)

    wait_for(agents_ready, "a Ready nodeqos-agent on every node", timeout=180)
    wait_for(
        lambda: _running(kube, SYSTEM_NAMESPACE, "app.kubernetes.io/name=nodeqos-manager"),
        "a Ready nodeqos-manager",
        timeout=180,
    )
    path: str = wait_for(
        lambda: applied_by(kube), f"the manager to apply profile {PROFILE}", timeout=120
    )
    return path


# The manager's webhook configuration where the API server serves no MutatingAdmissionPolicy
# (manager.profilemutation.CONFIGURATION; testbed imports no product package).
PROFILES_WEBHOOK = rest.object_path(
    "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
    "nodeqos-colocation-profiles",
)  # fmt: skip


def applied_by(kube: rest.Rest, profile: str = PROFILE) -> str:
    """Which path applies `profile` ("" while neither is in place): its rendered policy's
    binding (MutatingAdmissionPolicy, 1.36 on), else the manager's webhook configuration
    (which serves every profile the manager's informer holds)."""
    if localcluster.exists(kube, _rendered("mutatingadmissionpolicybindings", profile)):
        return f"MutatingAdmissionPolicy nodeqos-colocation-{profile}"
    if localcluster.exists(kube, PROFILES_WEBHOOK):
        return "the manager's webhook (nodeqos-colocation-profiles)"
    return ""


def _reset_node(kube: rest.Rest, node: str) -> None:
    """The scenario's labels and the manager's batch and mid resources off the Node."""
    kube.patch(
        f"/api/v1/nodes/{node}", {"metadata": {"labels": {SMALL_LABEL: None, AGENT_LABEL: None}}}
    )
    with contextlib.suppress(rest.ApiError):
        kube.patch(
            f"/api/v1/nodes/{node}/status",
            {
                "status": {
                    key: dict.fromkeys(EXTENDED_RESOURCES) for key in ("capacity", "allocatable")
                }
            },
        )


# -- the workloads -------------------------------------------------------------------


def _container(
    command: str, requests: Mapping[str, str], limits: Mapping[str, str]
) -> dict[str, Any]:
    return {
        "name": "main",
        "image": BUSYBOX_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", command],
        "resources": {"requests": dict(requests), "limits": dict(limits)},
    }


def online_deployment(
    name: str,
    node: str,
    *,
    busy: bool,
    replicas: int = 1,
    request_millis: int = ONLINE_REQUEST_MILLIS,
) -> dict[str, Any]:
    """A latency-sensitive Deployment on `node`: asks `request_millis` (limit 2 CPUs: one
    busy thread can never reach its quota, so any throttling would come from elsewhere)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ONLINE_NAMESPACE},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, "koordinator.sh/qosClass": "LS"}},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "containers": [
                        _container(
                            "while :; do :; done" if busy else "sleep 100000",
                            {"cpu": f"{request_millis}m", "memory": "32Mi"},
                            {"cpu": "2", "memory": "64Mi"},
                        )
                    ],
                    "terminationGracePeriodSeconds": 1,
                    "automountServiceAccountToken": False,
                },
            },
        },
    }


def batch_job() -> dict[str, Any]:
    """A Job of busy pods asking plain cpu/memory; the profile makes them Batch."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "crunch", "namespace": BATCH_NAMESPACE},
        "spec": {
            "parallelism": BATCH_PODS,
            "completions": BATCH_PODS,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {"role": "batch", "app": "crunch"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        _container(
                            "while :; do :; done",
                            {"cpu": f"{BATCH_REQUEST_MILLIS}m", "memory": "32Mi"},
                            {"cpu": "1", "memory": "64Mi"},
                        )
                    ],
                    "terminationGracePeriodSeconds": 1,
                    "automountServiceAccountToken": False,
                },
            },
        },
    }


def _check_profiled(kube: rest.Rest, job: str, path: str) -> None:
    """The Job's first pod as admission made it, checked at once: an unprofiled busy pod
    asks plain cpu, runs at a real weight and would only starve this machine's control
    plane until some later wait gave up. The Job goes and the error names the path."""
    first = wait_for(
        lambda: placementwatch.pods(kube, BATCH_NAMESPACE, "app=crunch")[:1],
        "the Job's first pod",
        timeout=60,
    )[0]
    came_out = profiled(first)
    if came_out == EXPECTED_BATCH_POD:
        return
    with contextlib.suppress(rest.ApiError):
        kube.delete(job, {"propagationPolicy": "Background"})
    raise AssertionError(
        f"{path or 'no path'} did not apply profile {PROFILE} to pod "
        f"{first['metadata']['name']}: it came out as {came_out}, not "
        f"{EXPECTED_BATCH_POD}. The manager's logs and metrics (profile_webhook_up) and "
        "the API server's log ('failed calling webhook') say why."
    )


def profiled(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a pod that `profile()` sets, as admission left them."""
    labels = pod["metadata"].get("labels") or {}
    spec = pod["spec"]
    return {
        "labels": {k: labels.get(k) for k in ("koordinator.sh/qosClass", "colocated-by")},
        **{k: spec.get(k) for k in ("priorityClassName", "priority", "preemptionPolicy")},
        "resources": spec["containers"][0].get("resources"),
    }


# What `profiled` reads off a pod of `batch_job()` once `profile()` applied: on every
# Kubernetes minor and through either path, this pod and no other.
EXPECTED_BATCH_POD = {
    "labels": {"koordinator.sh/qosClass": "BE", "colocated-by": "nodeqos"},
    "priorityClassName": PRIORITY_CLASS,
    "priority": 5000,
    "preemptionPolicy": "Never",
    "resources": {
        "requests": {BATCH_CPU: str(BATCH_REQUEST_MILLIS), BATCH_MEMORY: "32Mi"},
        "limits": {BATCH_CPU: "1k", BATCH_MEMORY: "64Mi"},
    },
}


# -- the outcome ---------------------------------------------------------------------


@dataclass
class Outcome:
    """What each step measured (millicores, percent, seconds); `to_json` for the summary."""

    capacity: dict[str, int] = field(default_factory=dict)
    batch_cpu: dict[str, int] = field(default_factory=dict)
    batch_pods: dict[str, int] = field(default_factory=dict)  # node -> Running batch pods
    batch_requests: dict[str, str] = field(default_factory=dict)  # what a batch pod asked for
    # the fields the profile set on a batch pod, as admission left them (`profiled`): the
    # same whichever path applied it (MutatingAdmissionPolicy or the manager's webhook)
    batch_pod: dict[str, Any] = field(default_factory=dict)
    profile_path: str = ""  # which path applied the profile (`applied_by`)
    pending_batch_pods: int = 0
    cluster_cpu_before: float | None = None
    cluster_cpu_after: float | None = None
    pressed_batch_before: int | None = None
    pressed_batch_after: int | None = None
    shrink_seconds: float | None = None
    be_usage_before: int | None = None
    be_usage_after: int | None = None
    be_quota_before: int | None = None
    be_quota_after: int | None = None
    online_usage_before: int | None = None
    online_usage_after: int | None = None
    online_throttled_before: int | None = None
    online_throttled_after: int | None = None
    server_alone: onlineserver.Sample | None = None  # n1's web server, batch not yet placed
    server_with_batch: onlineserver.Sample | None = None  # and with the batch pods running
    stopped_batch_before: tuple[int, int] | None = None
    stopped_batch_after: tuple[int, int] | None = None
    degrade_seconds: float | None = None
    degrade_event: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def problems(self) -> list[str]:
        """What did not go as the scenario shows it should (empty when all did)."""
        found = []
        if any(self.batch_cpu.get(n, 0) < 2 * BATCH_REQUEST_MILLIS for n in NODES if n != SMALL):
            found.append(f"batch-cpu too small where not capped: {self.batch_cpu}")
        if self.batch_pods.get(SMALL, 0) or sum(self.batch_pods.values()) != BATCH_PODS:
            found.append(f"batch pods not placed on Batch capacity only: {self.batch_pods}")
        if BATCH_CPU not in self.batch_requests or "cpu" in self.batch_requests:
            found.append(f"the profile did not make the pods Batch: {self.batch_requests}")
        if self.batch_pod != EXPECTED_BATCH_POD:
            found.append(f"the profile left a batch pod other than expected: {self.batch_pod}")
        if (self.cluster_cpu_after or 0) <= (self.cluster_cpu_before or 0):
            found.append("cluster CPU did not rise with the batch pods")
        if (self.pressed_batch_after or 0) >= (self.pressed_batch_before or 0) - SHRINK_MILLIS:
            found.append(f"{PRESSED}'s batch-cpu did not shrink with the measured online usage")
        if (self.be_usage_after or 0) >= (self.be_usage_before or 0):
            found.append(f"the BE pods' usage on {PRESSED} did not drop")
        if self.online_throttled_after != self.online_throttled_before:
            found.append(f"the online pods on {PRESSED} were throttled")
        for label, sample in (("alone", self.server_alone), ("with batch", self.server_with_batch)):
            if sample is None or sample.errors > sample.requests // 10:
                found.append(f"the web server on {SERVER_NODE} did not answer {label}: {sample}")
        if self.stopped_batch_after != (0, 0) or DEGRADED_REASON not in self.degrade_event:
            found.append(f"{STOPPED}'s batch resources did not degrade to zero")
        return found


# -- the scenario --------------------------------------------------------------------


def _namespace(kube: rest.Rest, name: str, labels: Mapping[str, str]) -> None:
    kube.create("/api/v1/namespaces", {"metadata": {"name": name, "labels": dict(labels)}})
    localcluster.wait_namespace_ready(kube, name)


def step_capacity(kube: rest.Rest, outcome: Outcome, say: Say) -> None:
    """Idle online Deployments (600m each, sleeping); each node's batch-cpu as it appears."""
    say("\n── 1. slack becomes Batch capacity " + "─" * 42)
    outcome.capacity = capacity_millis(kube)
    _namespace(kube, ONLINE_NAMESPACE, {})
    for node in NODES:
        if node != SERVER_NODE:
            localcluster.apply(kube, online_deployment(f"web-{node}", node, busy=False))
    server = onlineserver.start(
        kube,
        ONLINE_NAMESPACE,
        node=SERVER_NODE,
        name=f"web-{SERVER_NODE}",
        cpu_request=f"{ONLINE_REQUEST_MILLIS}m",
    )
    wait_for(
        lambda: len(_running(kube, ONLINE_NAMESPACE, "")) == len(NODES),
        "the online web pods Running",
        timeout=120,
    )
    say(
        f"online workloads web-{{{','.join(NODES)}}}: each asks {ONLINE_REQUEST_MILLIS}m of "
        f"{outcome.capacity[NODES[0]]}m; on {SERVER_NODE} nginx serving {server.url}, "
        "elsewhere a sleeping Deployment"
    )
    shown: dict[str, int] = {}

    def published() -> bool:
        for node, value in batch_allocatable(kube).items():
            if value is not None and shown.get(node) != value[0]:
                shown[node] = value[0]
                say(f"  {node}: batch-cpu {value[0]}m, batch-memory {value[1] / 2**30:.1f}Gi")
        return set(shown) >= set(NODES) and all(
            shown[n] >= 2 * BATCH_REQUEST_MILLIS for n in NODES if n != SMALL
        )

    wait_for(published, "every node's batch-cpu (n1, n2 room for two batch pods)", timeout=180)
    outcome.batch_cpu = dict(shown)
    outcome.server_alone = _load_server(kube, "alone", say)


def _load_server(kube: rest.Rest, label: str, say: Say) -> onlineserver.Sample:
    """vegeta at SERVER_RATE against n1's web server; its figures printed and returned."""
    path = f"/api/v1/namespaces/{ONLINE_NAMESPACE}/pods/web-{SERVER_NODE}"
    found = kube.get(path)
    server = onlineserver.Server(
        f"http://{found['status']['podIP']}/", found["metadata"]["uid"], SERVER_NODE
    )
    with tempfile.TemporaryDirectory(prefix="nodeqos-vegeta-") as workdir:
        sample = onlineserver.measure(
            server,
            vegeta.find(),
            rate=SERVER_RATE,
            seconds=SERVER_SECONDS,
            workdir=Path(workdir),
            node_cpus=capacity_millis(kube)[SERVER_NODE] // 1000,
        )
    say(
        f"  web server on {SERVER_NODE}, {label}: {SERVER_RATE} req/s for {SERVER_SECONDS:g}s, "
        f"p50 {sample.p50_ms:.2f} ms, p99 {sample.p99_ms:.2f} ms, p99.9 {sample.p999_ms:.2f} ms, "
        f"errors {sample.errors}/{sample.requests}; {SERVER_NODE}'s CPU {sample.node_cpu_percent}%"
    )
    return sample


def step_placement(kube: rest.Rest, outcome: Outcome, say: Say) -> None:
    """The batch Job: kube-scheduler places its pods only where Batch capacity is."""
    say("\n── 2. a batch Job placed on Batch capacity " + "─" * 34)
    outcome.cluster_cpu_before = cluster_cpu_percent(kube, outcome.capacity)
    say(f"cluster CPU before (NodeMetrics): {outcome.cluster_cpu_before or 0:.1f}%")
    _namespace(kube, BATCH_NAMESPACE, {"colocation": "on"})
    job = rest.object_path("batch", "v1", "jobs", namespace=BATCH_NAMESPACE)
    kube.create(job, batch_job())
    _check_profiled(kube, job + "/crunch", outcome.profile_path)

    def placed() -> list[dict[str, Any]] | None:
        pods = _running(kube, BATCH_NAMESPACE, "app=crunch")
        return pods if len(pods) == BATCH_PODS else None

    pods: list[dict[str, Any]] = wait_for(placed, f"{BATCH_PODS} batch pods Running", timeout=180)
    started = time.time()
    first = pods[0]
    outcome.batch_requests = {
        str(k): str(v) for k, v in first["spec"]["containers"][0]["resources"]["requests"].items()
    }
    outcome.batch_pod = profiled(first)
    counts = {n: 0 for n in NODES}
    for pod in pods:
        counts[pod["spec"]["nodeName"]] += 1
    outcome.batch_pods = counts
    say(
        f"Job crunch: {BATCH_PODS} pods created asking cpu {BATCH_REQUEST_MILLIS}m; "
        f"{outcome.profile_path or 'the profile'} made them "
        f"{first['metadata']['labels'].get('koordinator.sh/qosClass')} "
        f"asking {outcome.batch_requests} (QoS {first['status'].get('qosClass')})"
    )
    say(
        "kube-scheduler placed them: "
        + ", ".join(f"{n} {c} (batch-cpu {outcome.batch_cpu.get(n)}m)" for n, c in counts.items())
    )
    outcome.server_with_batch = _load_server(kube, "with batch", say)
    metric = wait_report_after(kube, NODES[0], started, timeout=180)
    for node in NODES[1:]:
        wait_report_after(kube, node, started, timeout=120)
    del metric
    outcome.cluster_cpu_after = cluster_cpu_percent(kube, outcome.capacity)
    say(
        f"cluster CPU after (NodeMetrics): {outcome.cluster_cpu_before or 0:.1f}% → "
        f"{outcome.cluster_cpu_after or 0:.1f}%"
    )


def _online_throttled(kube: rest.Rest) -> int:
    total = 0
    for pod in placementwatch.pods(kube, ONLINE_NAMESPACE):
        if pod["spec"].get("nodeName") == PRESSED:
            directory = pod_cgroup(PRESSED, pod["metadata"]["uid"])
            total += nr_throttled(directory) if directory else 0
    return total


def step_pressure(kube: rest.Rest, outcome: Outcome, say: Say) -> None:
    """Online load rises on n1: batch-cpu shrinks, BE is suppressed, online is not throttled."""
    say(f"\n── 3. online load rises on {PRESSED} " + "─" * 42)
    before = nodemetrics(kube)[PRESSED]
    outcome.be_usage_before = pods_usage_millis(before, BATCH_NAMESPACE)
    outcome.online_usage_before = pods_usage_millis(before, ONLINE_NAMESPACE)
    outcome.pressed_batch_before = (batch_allocatable(kube)[PRESSED] or (0, 0))[0]
    outcome.be_quota_before = besteffort_quota_us(PRESSED)
    outcome.online_throttled_before = _online_throttled(kube)
    say(
        f"{PRESSED} before: batch-cpu {outcome.pressed_batch_before}m, BE pods use "
        f"{outcome.be_usage_before}m, online pods {outcome.online_usage_before}m; "
        f"besteffort cfs quota {outcome.be_quota_before}µs; online nr_throttled "
        f"{outcome.online_throttled_before}"
    )
    localcluster.apply(
        kube,
        online_deployment(
            "burst", PRESSED, busy=True, replicas=BURST_PODS, request_millis=BURST_REQUEST_MILLIS
        ),
    )
    wait_for(
        lambda: len(_running(kube, ONLINE_NAMESPACE, "app=burst")) == BURST_PODS,
        "the burst pods Running",
        timeout=120,
    )
    started, wall = time.monotonic(), time.time()
    say(
        f"online Deployment burst: {BURST_PODS} busy pod(s) on {PRESSED} (asking"
        f" {BURST_REQUEST_MILLIS}m each, burning a core)"
    )

    def shrunk() -> int | None:
        value = batch_allocatable(kube)[PRESSED]
        # by more than the burst's requests and a margin: only its reported usage does that
        if value is not None and value[0] < (outcome.pressed_batch_before or 0) - SHRINK_MILLIS:
            return value[0]
        return None

    outcome.pressed_batch_after = wait_for(
        shrunk, f"{PRESSED}'s batch-cpu to shrink", timeout=4 * (REPORT_SECONDS + UPDATE_SECONDS)
    )
    outcome.shrink_seconds = round(time.monotonic() - started, 1)
    say(
        f"  {PRESSED}: batch-cpu {outcome.pressed_batch_before}m → {outcome.pressed_batch_after}m "
        f"after {outcome.shrink_seconds:.0f}s (one report + one update interval: "
        f"{REPORT_SECONDS + UPDATE_SECONDS}s)"
    )
    after = wait_report_after(kube, PRESSED, wall, timeout=180)
    outcome.be_usage_after = pods_usage_millis(after, BATCH_NAMESPACE)
    outcome.online_usage_after = pods_usage_millis(after, ONLINE_NAMESPACE)
    outcome.be_quota_after = besteffort_quota_us(PRESSED)
    outcome.online_throttled_after = _online_throttled(kube)
    say(
        f"  {PRESSED} after: BE pods use {outcome.be_usage_before}m → {outcome.be_usage_after}m "
        f"(besteffort cfs quota {outcome.be_quota_before}µs → {outcome.be_quota_after}µs); "
        f"online pods {outcome.online_usage_before}m → {outcome.online_usage_after}m, "
        f"nr_throttled {outcome.online_throttled_before} → {outcome.online_throttled_after}"
    )


def step_degrade(kube: rest.Rest, outcome: Outcome, say: Say) -> None:
    """n2's agent stopped: past degradeTimeMinutes its batch resources go to zero."""
    say(f"\n── 4. the agent on {STOPPED} stops " + "─" * 43)
    outcome.stopped_batch_before = batch_allocatable(kube)[STOPPED]
    kube.patch(f"/api/v1/nodes/{STOPPED}", {"metadata": {"labels": {AGENT_LABEL: "off"}}})
    started = time.monotonic()

    def agent_gone() -> bool:
        agents = placementwatch.pods(kube, SYSTEM_NAMESPACE, "app.kubernetes.io/name=nodeqos-agent")
        return not any(p["spec"].get("nodeName") == STOPPED for p in agents)

    wait_for(agent_gone, f"the agent pod on {STOPPED} to be gone", timeout=120)
    say(
        f"labelled {STOPPED} {AGENT_LABEL}=off: the DaemonSet controller removed its agent "
        f"({time.monotonic() - started:.0f}s); batch before {outcome.stopped_batch_before}"
    )

    def zero() -> tuple[int, int] | None:
        value = batch_allocatable(kube)[STOPPED]
        return value if value == (0, 0) else None

    # degradeTimeMinutes after the last report, then the manager's next pass (60 s resync)
    wait_for(
        zero,
        f"{STOPPED}'s batch resources to go to zero",
        timeout=DEGRADE_MINUTES * 60 + REPORT_SECONDS + 60 + 90,
    )
    outcome.stopped_batch_after = (0, 0)
    outcome.degrade_seconds = round(time.monotonic() - started, 1)

    def event() -> str | None:
        for item in kube.get("/api/v1/namespaces/default/events")["items"]:
            if item["reason"] == DEGRADED_REASON and item["involvedObject"].get("name") == STOPPED:
                return f"{item['type']} {item['reason']}: {item['message']}"
        return None

    outcome.degrade_event = wait_for(event, f"Event {DEGRADED_REASON} on {STOPPED}", timeout=30)
    metric = nodemetrics(kube).get(STOPPED, {})
    stamp = update_time(metric)
    age = "" if stamp is None else f", its last NodeMetric {time.time() - stamp:.0f}s old"
    say(
        f"  {STOPPED}: batch-cpu/batch-memory {outcome.stopped_batch_before} → (0, 0) after "
        f"{outcome.degrade_seconds:.0f}s{age}; {outcome.degrade_event}"
    )


def run(kube: rest.Rest, say: Say) -> Outcome:
    """The four steps; the namespaces deleted at the end (nodeqos stays for `installed`)."""
    started = time.monotonic()
    outcome = Outcome(profile_path=applied_by(kube))
    try:
        step_capacity(kube, outcome, say)
        step_placement(kube, outcome, say)
        step_pressure(kube, outcome, say)
        step_degrade(kube, outcome, say)
        outcome.seconds = round(time.monotonic() - started, 1)
        return outcome
    finally:
        for namespace in (BATCH_NAMESPACE, ONLINE_NAMESPACE):
            localcluster.delete_path(kube, f"/api/v1/namespaces/{namespace}")
        for namespace in (BATCH_NAMESPACE, ONLINE_NAMESPACE):
            path = f"/api/v1/namespaces/{namespace}"
            wait_for(
                functools.partial(_gone, kube, path),
                f"namespace {namespace} to be gone",
                timeout=120,
            )


def _gone(kube: rest.Rest, path: str) -> bool:
    return not localcluster.exists(kube, path)


def summarize(outcome: Outcome, say: Say) -> None:
    say("\n── colocation summary " + "─" * 55)
    say("  batch-cpu allocatable: " + ", ".join(f"{n} {outcome.batch_cpu.get(n)}m" for n in NODES))
    say(
        "  batch pods placed by kube-scheduler: "
        + ", ".join(f"{n} {outcome.batch_pods.get(n, 0)}" for n in NODES)
        + f" (each asking {outcome.batch_requests})"
    )
    say(
        f"  cluster CPU (NodeMetrics): {outcome.cluster_cpu_before or 0:.1f}% → "
        f"{outcome.cluster_cpu_after or 0:.1f}%"
    )
    say(
        f"  {PRESSED} under online load: batch-cpu {outcome.pressed_batch_before}m → "
        f"{outcome.pressed_batch_after}m in {outcome.shrink_seconds}s; BE usage "
        f"{outcome.be_usage_before}m → {outcome.be_usage_after}m; besteffort quota "
        f"{outcome.be_quota_before} → {outcome.be_quota_after}µs; online nr_throttled "
        f"{outcome.online_throttled_before} → {outcome.online_throttled_after}"
    )
    say(f"  web server on {SERVER_NODE} ({SERVER_RATE} req/s): " + _server_line(outcome))
    say(
        f"  {STOPPED}'s agent stopped: batch {outcome.stopped_batch_before} → "
        f"{outcome.stopped_batch_after} in {outcome.degrade_seconds}s ({outcome.degrade_event})"
    )
    say(f"  {outcome.seconds:.0f}s on real nodes")


def _server_line(outcome: Outcome) -> str:
    alone, loaded = outcome.server_alone, outcome.server_with_batch
    if alone is None or loaded is None:
        return "not measured"
    return (
        f"p99 {alone.p99_ms:.2f} ms alone ({SERVER_NODE}'s CPU {alone.node_cpu_percent}%) → "
        f"{loaded.p99_ms:.2f} ms with {outcome.batch_pods.get(SERVER_NODE, 0)} batch pod(s) "
        f"({loaded.node_cpu_percent}%); p99.9 {alone.p999_ms:.2f} → {loaded.p999_ms:.2f} ms. "
        "A shared machine's figure: `python -m bench interference` measures it on a quiet CPU"
    )


__all__ = ["Outcome", "installed", "manifests", "run", "summarize"]
