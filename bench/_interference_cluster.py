"""The one real node of `python -m bench interference` and what runs on it.

One kubelet + containerd (testbed.localnodes) beside the local control plane
with kube-scheduler, the node's pods confined to CPU 1 by the cpuset of its
cgroup root (/sys/fs/cgroup/cpuset/nodeqos-n1, written before the kubelet
makes kubepods below it) and CPU 0 reserved for the system by the kubelet's
static CPU manager (`KUBELET_CPU_MANAGER`): the bench process pins itself to CPU 0 before it
starts anything, so the control plane, containerd, the kubelet and vegeta
inherit CPU 0 (runc moves each container's processes into its cgroup, whose
cpuset is CPU 1). nodeqos's own agent and manager are pods: they run on the
node's CPU, as on a real node, and their usage is reported apart.

Here: the online server (nginx, an LS Burstable pod), the batch pods, nodeqos
installed from deploy/ and removed again, and the node's cgroup v1 counters.
Imports `kube` and `testbed` only.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kube import quantity, rest
from testbed import localcluster, localnodes, onlineserver, placementloop, placementwatch

NODE = "n1"
NODE_CPUS = "1"  # the node's pods' CPUs: its cgroup root's cpuset
NODE_CPU_COUNT = 1
# The node's root weighs 1024 per core against the host, as kubelet's kubepods on
# a real node: the tests' 262,144 (localnodes.NODE_ROOT_SHARES, against a loaded
# shared machine) would starve ksoftirqd on the node's CPU, which carries the
# server's network traffic whenever the batch pods keep the CPU busy.
NODE_ROOT_CPU = localnodes.RootCPU(cpus=NODE_CPUS, shares=1024 * NODE_CPU_COUNT)
HOST_CPUS = frozenset({0})  # the bench, vegeta, control plane, kubelet, containerd
# The kubelet keeps pods off HOST_CPUS by its own means: the static CPU manager
# with those CPUs strictly reserved gives every container the cpuset NODE_CPUS.
KUBELET_CPU_MANAGER = {
    "cpuManagerPolicy": "static",
    "cpuManagerPolicyOptions": {"strict-cpu-reservation": "true"},
    "reservedSystemCPUs": ",".join(map(str, sorted(HOST_CPUS))),
}
ONLINE_NAMESPACE = "interference-online"
BATCH_NAMESPACE = "interference-batch"  # labelled colocation=on: the profile's
PLAIN_NAMESPACE = "interference-plain"  # not selected by the profile (arm 2's pods)
SYSTEM_NAMESPACE = placementloop.SYSTEM_NAMESPACE
BUSYBOX_IMAGE = placementloop.BUSYBOX_IMAGE
BATCH_PODS = 2  # two busy threads: more than the node's one CPU
BATCH_REQUEST_MILLIS = 100
# Koordinator's default thresholds (65 %) are shares of the node's capacity. The
# kubelet reports both host CPUs as capacity and one as reserved, so 65 % of the
# pods' one CPU on top of the reserved one is (1 + 0.65) / 2 of capacity: 83 %.
POD_SHARE_PERCENT = 65
THRESHOLD_PERCENT = -(-(100 * (2 - NODE_CPU_COUNT) + POD_SHARE_PERCENT * NODE_CPU_COUNT) // 2)
PROFILE = "interference"
PRIORITY_CLASS = "koord-batch"
PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
PROFILES = rest.object_path("config.koordinator.sh", "v1alpha1", "clustercolocationprofiles")
NODEMETRICS = placementloop.NODEMETRICS
DAEMONSET = rest.object_path(
    "apps", "v1", "daemonsets", "nodeqos-agent", namespace=SYSTEM_NAMESPACE
)
SLO_CONFIG = f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/configmaps/slo-controller-config"
BATCH_CPU = "kubernetes.io/batch-cpu"
CGROUP = Path("/sys/fs/cgroup")


class StartFailure(RuntimeError):
    """A part of the bench did not start; `part` names it (server, generator, image ...)."""

    def __init__(self, part: str, detail: str) -> None:
        super().__init__(f"the {part} failed to start: {detail}")
        self.part = part


def wait_for(check: Any, what: str, *, timeout: float, interval: float = 0.5) -> Any:
    """localcluster.wait_for, an API server too busy to answer counting as "not yet"."""

    def tolerant() -> Any:
        try:
            return check()
        except rest.ApiUnavailable:
            return None

    return localcluster.wait_for(tolerant, what, timeout=timeout, interval=interval)


# one place for both: the loops of testbed use them too
exists = localcluster.exists
delete = localcluster.delete_path


# -- cgroup v1 counters of the node ----------------------------------------------------


def node_dir(controller: str) -> Path:
    return CGROUP / controller / f"nodeqos-{NODE}"


def read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def cpu_stat(path: Path) -> dict[str, int]:
    try:
        text = path.read_text()
    except OSError:
        return {}
    return {k: int(v) for k, _, v in (line.partition(" ") for line in text.splitlines()) if v}


def pod_dir(controller: str, uid: str) -> Path | None:
    kubepods = node_dir(controller) / "kubepods"
    for parent in (kubepods / "burstable", kubepods / "besteffort", kubepods):
        if (parent / f"pod{uid}").is_dir():
            return parent / f"pod{uid}"
    return None


@dataclass(frozen=True, slots=True)
class Counters:
    """Cumulative CPU time (ns) of the node and its parts, at `at` (monotonic s)."""

    at: float
    node_ns: int
    online_ns: int
    besteffort_ns: int
    nodeqos_ns: int
    be_throttled_ns: int


def counters(online_uid: str, nodeqos_uids: list[str]) -> Counters:
    def usage(directory: Path | None) -> int:
        return (read_int(directory / "cpuacct.usage") or 0) if directory else 0

    kubepods = node_dir("cpuacct") / "kubepods"
    be_stat = cpu_stat(node_dir("cpu") / "kubepods" / "besteffort" / "cpu.stat")
    return Counters(
        at=time.monotonic(),
        node_ns=usage(node_dir("cpuacct")),
        online_ns=usage(pod_dir("cpuacct", online_uid)),
        besteffort_ns=usage(kubepods / "besteffort"),
        nodeqos_ns=sum(usage(pod_dir("cpuacct", uid)) for uid in nodeqos_uids),
        be_throttled_ns=be_stat.get("throttled_time", 0),
    )


def cpu_percent(before: Counters, after: Counters) -> dict[str, float]:
    """Each part's CPU over the interval as a percentage of the node's CPUs."""
    span = (after.at - before.at) * NODE_CPU_COUNT * 1e9
    share = {
        "node": after.node_ns - before.node_ns,
        "online": after.online_ns - before.online_ns,
        "batch": after.besteffort_ns - before.besteffort_ns,
        "nodeqos": after.nodeqos_ns - before.nodeqos_ns,
        "batch_throttled": after.be_throttled_ns - before.be_throttled_ns,
    }
    return {f"{k}_cpu_percent": round(100.0 * v / span, 1) for k, v in share.items()}


def besteffort_state() -> dict[str, Any]:
    """The BE QoS cgroup's knobs nodeqos may set (quota, cpuset)."""
    be = "kubepods/besteffort"
    return {
        "cfs_quota_us": read_int(node_dir("cpu") / be / "cpu.cfs_quota_us"),
        "cpuset": (node_dir("cpuset") / be / "cpuset.cpus").read_text().strip()
        if (node_dir("cpuset") / be / "cpuset.cpus").is_file()
        else None,
    }


def reset_besteffort() -> None:
    """Undo what an uninstalled agent left on the BE QoS cgroup (kubelet never rewrites
    these): unlimited quota, the node's CPUs."""
    be = "kubepods/besteffort"
    with contextlib.suppress(OSError):
        (node_dir("cpu") / be / "cpu.cfs_quota_us").write_text("-1")
    with contextlib.suppress(OSError):
        (node_dir("cpuset") / be / "cpuset.cpus").write_text(NODE_CPUS)


# -- the workloads -------------------------------------------------------------------


def namespace(kube: rest.Rest, name: str, labels: Mapping[str, str]) -> None:
    kube.create("/api/v1/namespaces", {"metadata": {"name": name, "labels": dict(labels)}})
    localcluster.wait_namespace_ready(kube, name)


def batch_namespace(batch: bool) -> str:
    """Where the batch pods go: the profile's namespace, or one it never selects (so a
    policy the API server has not yet dropped cannot touch arm 2's pods)."""
    return BATCH_NAMESPACE if batch else PLAIN_NAMESPACE


def batch_pod(index: int, *, batch: bool) -> dict[str, Any]:
    """A busy pod. `batch`: asks cpu, which the profile turns into batch-cpu (nodeqos
    arms); otherwise no requests at all: BestEffort under kubelet's defaults."""
    resources = (
        {
            "requests": {"cpu": f"{BATCH_REQUEST_MILLIS}m", "memory": "16Mi"},
            "limits": {"cpu": "1", "memory": "32Mi"},
        }
        if batch
        else {}
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"crunch-{index}",
            "namespace": batch_namespace(batch),
            "labels": {"role": "batch", "app": "crunch"},
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": BUSYBOX_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", "while :; do :; done"],
                    "resources": resources,
                }
            ],
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
        },
    }


def start_server(kube: rest.Rest, *, timeout: float = 120.0) -> tuple[str, str]:
    """The online pod Ready and answering; (its URL, its uid). StartFailure("server") if not."""
    namespace(kube, ONLINE_NAMESPACE, {})
    try:
        server = onlineserver.start(kube, ONLINE_NAMESPACE, timeout=timeout)
    except onlineserver.NotReady as err:
        raise StartFailure("server", str(err)) from err
    return server.url, server.uid


def start_batch(kube: rest.Rest, *, batch: bool, timeout: float = 120.0) -> None:
    namespace = batch_namespace(batch)
    for index in range(BATCH_PODS):
        kube.create(f"/api/v1/namespaces/{namespace}/pods", batch_pod(index, batch=batch))

    def running() -> bool:
        pods = placementwatch.pods(kube, namespace, "app=crunch")
        return sum(bool(p["status"].get("phase") == "Running") for p in pods) >= BATCH_PODS

    try:
        wait_for(running, f"{BATCH_PODS} batch pods Running", timeout=timeout)
    except TimeoutError as err:
        pods = placementwatch.pods(kube, namespace, "app=crunch")
        raise StartFailure(
            "batch", "; ".join(f"{p['metadata']['name']}: {onlineserver.problem(p)}" for p in pods)
        ) from err


def stop_batch(kube: rest.Rest, *, batch: bool, timeout: float = 120.0) -> None:
    namespace = batch_namespace(batch)
    for pod in placementwatch.pods(kube, namespace, "app=crunch"):
        delete(kube, f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}")
    wait_for(
        lambda: not placementwatch.pods(kube, namespace, "app=crunch"),
        "the batch pods gone",
        timeout=timeout,
    )


def batch_requests(kube: rest.Rest, *, batch: bool) -> dict[str, str]:
    """What the first batch pod asks after admission (the profile's doing, or not)."""
    pods = placementwatch.pods(kube, batch_namespace(batch), "app=crunch")
    if not pods:
        return {}
    requests = pods[0]["spec"]["containers"][0].get("resources", {}).get("requests", {})
    return {str(k): str(v) for k, v in requests.items()} | {
        "qosClass": str(pods[0]["status"].get("qosClass"))
    }


def batch_cpu(kube: rest.Rest) -> int | None:
    value = kube.get(f"/api/v1/nodes/{NODE}")["status"].get("allocatable", {}).get(BATCH_CPU)
    return None if value is None else quantity.quantity_value(value)


def nodeqos_pod_uids(kube: rest.Rest) -> list[str]:
    if not exists(kube, f"/api/v1/namespaces/{SYSTEM_NAMESPACE}"):
        return []
    return [str(p["metadata"]["uid"]) for p in placementwatch.pods(kube, SYSTEM_NAMESPACE)]


def delete_namespaces(kube: rest.Rest, names: tuple[str, ...], *, timeout: float = 120.0) -> None:
    for name in names:
        delete(kube, f"/api/v1/namespaces/{name}")
    for name in names:
        wait_for(
            lambda name=name: not exists(kube, f"/api/v1/namespaces/{name}"),
            f"namespace {name} gone",
            timeout=timeout,
        )


@contextlib.contextmanager
def on_host_cpus() -> Iterator[None]:
    """This process (and so every child it starts meanwhile) on the host's CPUs, off
    the node's; the affinity it had restored on exit."""
    was = os.sched_getaffinity(0)
    os.sched_setaffinity(0, HOST_CPUS)
    try:
        yield
    finally:
        os.sched_setaffinity(0, was)
