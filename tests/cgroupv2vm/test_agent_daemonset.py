"""The nodeqos agent as its DaemonSet pod on the cgroup v2 + systemd VM node (issue 28).

The image is hack/node-image.sh's (the real-node suite's), carried in on a disk and
imported with ``ctr``; the manifests are deploy/daemonset.yaml as users apply them,
the image placeholder replaced, nothing else (the VM is the cluster's only node,
and its kubelet's cgroupRoot is the default, so neither a node selector nor
``--kubelet-cgroup-root`` is needed). The agent's NodeMetric is then checked
against the guest kernel's own counts: a busy pod's CPU and a ballast pod's memory.
"""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube import quantity, rest, slo
from testbed import localcluster
from tests.cgroupv2vm import guestnode
from tests.cgroupv2vm.conftest import (
    NODE_NAME,
    NODEQOS_IMAGE,
    NODEQOS_IMAGE_DISK,
    GuestRun,
    JoinedNode,
    required,
)
from tests.e2e import pods
from tests.e2e.conftest import wait_namespace_ready

pytestmark = [pytest.mark.cgroupv2vm, pytest.mark.slow]

DAEMONSET_MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "daemonset.yaml"
PLACEHOLDER = "NODEQOS_IMAGE"
NAMESPACE = "nodeqos-system"
NODEMETRIC = f"/apis/{slo.API_VERSION}/nodemetrics/{NODE_NAME}"
# The report's averaging window: long enough that its whole-second updateTime costs
# at most a few percent of the reference, short enough for TCG.
AGGREGATE_S = 30
BUSY_CPU = "500m"
BALLAST_BYTES = 96 * 1024 * 1024
# In a memory-backed emptyDir: tmpfs pages charged to the writer's memory cgroup,
# counted as anon (a containerd sandbox's /dev/shm is only 64 MiB).
HOLD_BALLAST = f"head -c {BALLAST_BYTES} /dev/zero > /ballast/held; sleep 100000"


def manifests(image: str) -> list[dict[str, Any]]:
    """deploy/daemonset.yaml with `image` in place of the placeholder, nothing else
    changed (its startup probe gives a slow start under TCG the ten minutes it needs)."""
    docs = []
    for raw in yaml.safe_load_all(DAEMONSET_MANIFEST.read_text()):
        if not raw:
            continue
        doc = copy.deepcopy(raw)
        if doc["kind"] == "DaemonSet":
            for container in doc["spec"]["template"]["spec"]["containers"]:
                assert container["image"] == PLACEHOLDER, container["image"]
                container["image"] = image
        docs.append(doc)
    return docs


@dataclass
class AgentPod:
    """The agent DaemonSet's pod, Ready on the VM node."""

    node: JoinedNode
    kube: rest.Rest
    name: str
    import_seconds: float
    ready_seconds: float

    def log(self) -> str:
        """The agent container's log, read from the kubelet's files in the guest."""
        done = self.node.machine.sh(
            f"cat /var/log/pods/{NAMESPACE}_{self.name}_*/agent/*.log", check=False
        )
        return done.text


def _agent_pod(kube: rest.Rest) -> dict[str, Any] | None:
    found = kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]
    for pod in found:
        conditions = pod["status"].get("conditions", [])
        if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
            return dict(pod)
    return None


@pytest.fixture(scope="module")
def agent(guest: GuestRun, joined: JoinedNode) -> Iterator[AgentPod]:
    """hack/node-image.sh's image imported in the VM, deploy/daemonset.yaml applied, its
    pod Ready (so it has published the NodeMetric, whose policy the test set first)."""
    if guest.agent_image_missing:
        message = f"no nodeqos image for the agent DaemonSet: {guest.agent_image_missing}"
        if required():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    kube = rest.Rest(rest.api_client(joined.plane.kubeconfig), qps=0)
    import_s = guestnode.import_image(joined.machine, NODEQOS_IMAGE_DISK)
    kube.create(
        f"/apis/{slo.API_VERSION}/nodemetrics",
        {
            "apiVersion": slo.API_VERSION,
            "kind": "NodeMetric",
            "metadata": {"name": NODE_NAME},
            "spec": {
                "metricCollectPolicy": {
                    "aggregateDurationSeconds": AGGREGATE_S,
                    "reportIntervalSeconds": 30,
                }
            },
        },
    )
    started = time.monotonic()
    for doc in manifests(NODEQOS_IMAGE):
        localcluster.apply(kube, doc)
        if doc["kind"] == "Namespace":
            wait_namespace_ready(kube, NAMESPACE, timeout=300)
    try:
        pod, _ = guestnode.wait("the agent pod Ready", 600, lambda: _agent_pod(kube))
    except AssertionError as err:
        agent_log = joined.machine.sh(
            f"tail -n 40 /var/log/pods/{NAMESPACE}_*/agent/*.log", check=False
        ).text
        pods_now = kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]
        states = [(p["metadata"]["name"], p["status"].get("containerStatuses")) for p in pods_now]
        raise AssertionError(f"{err}: {states}\nagent log:\n{agent_log}") from err
    yield AgentPod(joined, kube, pod["metadata"]["name"], import_s, time.monotonic() - started)


def test_agent_detects_the_systemd_cgroup_driver_on_v2(agent: AgentPod) -> None:
    """The agent pod's start-up line says cgroup v2 with the systemd driver (auto-detected)."""
    log = agent.log()
    print(
        f"cgroupv2vm: daemonset: nodeqos image import {agent.import_seconds:.1f}s; "
        f"manifests applied to agent pod Ready {agent.ready_seconds:.1f}s"
    )
    assert "cgroup v2 (systemd driver) at /host/sys/fs/cgroup" in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]


def _guest_sample(agent: AgentPod, cpu_stat: str) -> tuple[float, int]:
    """(guest clock, usage_usec of `cpu_stat`) read in one command in the guest."""
    done = agent.node.machine.sh(f"date +%s.%N; cat {cpu_stat}")
    lines = done.text.split()
    usage = dict(zip(lines[1::2], lines[2::2], strict=False))["usage_usec"]
    return float(lines[0]), int(usage)


def _interpolate(samples: list[tuple[float, int]], at: float) -> float:
    """The usage counter at guest time `at`, linear between the samples around it."""
    for (t0, u0), (t1, u1) in itertools.pairwise(samples):
        if t0 <= at <= t1:
            return u0 + (u1 - u0) * (at - t0) / (t1 - t0)
    raise AssertionError(f"{at} is outside the samples {samples[0][0]}..{samples[-1][0]}")


def _report(kube: rest.Rest) -> tuple[float, dict[str, tuple[int, int]]]:
    """The NodeMetric's updateTime (epoch seconds) and each default-namespace pod's usage."""
    status = kube.get(NODEMETRIC).get("status") or {}
    update = status.get("updateTime")
    when = datetime.fromisoformat(update.replace("Z", "+00:00")).timestamp() if update else 0.0
    found = {
        p["name"]: (
            quantity.cpu_millis(p["podUsage"]["resources"]["cpu"]),
            quantity.memory_bytes(p["podUsage"]["resources"]["memory"]),
        )
        for p in status.get("podsMetric", [])
        if p["namespace"] == "default"
    }
    return when, found


def test_nodemetric_reports_a_busy_pods_cpu_and_a_ballast_pods_memory(agent: AgentPod) -> None:
    """The DaemonSet agent's NodeMetric has the busy pod's CPU within 10% of the guest
    kernel's count over the report's window, and the ballast pod's memory within 10%
    of what it holds."""
    kube = agent.kube
    busy = pods.pod("vm-burner", node=NODE_NAME, command=pods.BUSY_LOOP, cpu=BUSY_CPU)
    ballast = pods.pod(
        "vm-ballast", node=NODE_NAME, command=HOLD_BALLAST, cpu="100m", memory="256Mi"
    )
    ballast["spec"]["volumes"] = [{"name": "ballast", "emptyDir": {"medium": "Memory"}}]
    ballast["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "ballast", "mountPath": "/ballast"}
    ]
    for body in (busy, ballast):
        kube.create("/api/v1/namespaces/default/pods", body)
    running = pods.wait_for(
        lambda: _both_running(kube), "the burner and ballast pods Running", timeout=600
    )
    uid = running["vm-burner"]["metadata"]["uid"].replace("-", "_")
    cpu_stat = f"/sys/fs/cgroup/kubepods.slice/kubepods-pod{uid}.slice/cpu.stat"
    # The ballast is written at the pod's 100m limit on an emulated CPU: it takes a
    # while to be held in full (a first run's report saw 29 of 96 MiB), and the
    # report's window must begin after that.
    held = (
        f"/var/lib/kubelet/pods/{running['vm-ballast']['metadata']['uid']}"
        "/volumes/kubernetes.io~empty-dir/ballast/held"
    )
    _, write_s = guestnode.wait(
        "the ballast written in full",
        600,
        lambda: (
            agent.node.machine.sh(f"stat -c %s {held}", check=False).text.strip()
            == str(BALLAST_BYTES)
        ),
    )
    print(f"cgroupv2vm: daemonset: the {BALLAST_BYTES >> 20} MiB ballast held after {write_s:.0f}s")
    samples = [_guest_sample(agent, cpu_stat)]
    # A report whose whole window the agent saw with both pods running (and held).
    earliest = samples[0][0] + 5.0 + AGGREGATE_S
    deadline = time.monotonic() + 600
    while True:
        time.sleep(2.0)
        samples.append(_guest_sample(agent, cpu_stat))
        when, usage = _report(kube)
        whole = when >= earliest and set(usage) >= {"vm-burner", "vm-ballast"}
        if whole and samples[-1][0] >= when:  # the samples span the report's window
            break
        assert time.monotonic() < deadline, f"no NodeMetric report after {earliest}: {usage}"
    kernel_cores = (
        (_interpolate(samples, when) - _interpolate(samples, when - AGGREGATE_S))
        / 1e6
        / AGGREGATE_S
    )
    assert kernel_cores > 0.05, f"the busy pod hardly ran: {samples}"
    busy_m, _ = usage["vm-burner"]
    _, held = usage["vm-ballast"]
    print(
        f"cgroupv2vm: daemonset NodeMetric: busy pod {busy_m}m, the kernel's count "
        f"{kernel_cores * 1000:.0f}m ({busy_m / 1000 / kernel_cores:.3f}); ballast pod "
        f"{held / 2**20:.1f} MiB for {BALLAST_BYTES / 2**20:.0f} MiB held"
    )
    assert abs(busy_m / 1000 - kernel_cores) <= 0.1 * kernel_cores, (usage, kernel_cores)
    assert abs(held - BALLAST_BYTES) <= 0.1 * BALLAST_BYTES, usage


def _both_running(kube: rest.Rest) -> dict[str, dict[str, Any]] | None:
    found = {}
    for name in ("vm-burner", "vm-ballast"):
        pod = kube.get(f"/api/v1/namespaces/default/pods/{name}")
        if pod["status"].get("phase") != "Running":
            return None
        found[name] = pod
    return found
