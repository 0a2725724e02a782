"""`nodeqos-descheduler --once` as a real process against the real API server.

Each test's nodes carry a label unique to it and the configuration's top-level
nodeSelector picks only them, so other tests' nodes never interfere. The
process gets the admin kubeconfig of the session's control plane.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from kube import objects, rest
from testbed import controlplane, localcluster

pytestmark = pytest.mark.controlplane

LABEL = "nodeqos-test"
NODEMETRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"


def descheduler_command() -> list[str]:
    """The installed console script (what users run), else the module."""
    found = shutil.which("nodeqos-descheduler")
    return [found] if found else [sys.executable, "-m", "descheduler.cli"]


@dataclass
class Cluster:
    kube: rest.Rest
    namespace: str
    nodes: list[str] = field(default_factory=list)

    def node(self, suffix: str) -> str:
        return f"{self.namespace}-{suffix}"

    def add_node(self, suffix: str) -> str:
        name = self.node(suffix)
        localcluster.register_node(self.kube, name, labels={LABEL: self.namespace})
        self.nodes.append(name)
        return name

    def run_pod(self, name: str, node: str, cpu: str) -> None:
        body = {
            "metadata": {
                "name": name,
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": f"{name}-rs",
                        "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.namespace}/{name}")),
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "nodeName": self.node(node),
                "containers": [
                    {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
                ],
            },
        }
        created = self.kube.create(f"/api/v1/namespaces/{self.namespace}/pods", body)
        localcluster.mark_running(self.kube, created)

    def report_usage(self, node: str, pods: dict[str, int]) -> None:
        """Publish a fresh NodeMetric for `node`, the way the agent does (create, then status)."""
        name = self.node(node)
        self.kube.create(
            NODEMETRICS,
            {
                "apiVersion": "slo.koordinator.sh/v1alpha1",
                "kind": "NodeMetric",
                "metadata": {"name": name},
            },
        )
        status = {
            "updateTime": localcluster.now_rfc3339(),
            "nodeMetric": {
                "nodeUsage": {"resources": {"cpu": f"{sum(pods.values())}m", "memory": "1Gi"}},
                "systemUsage": {"resources": {"cpu": "0", "memory": "1Gi"}},
            },
            "podsMetric": [
                {
                    "namespace": self.namespace,
                    "name": pod,
                    "podUsage": {"resources": {"cpu": f"{cpu}m", "memory": "0"}},
                }
                for pod, cpu in pods.items()
            ],
        }
        current = self.kube.get(f"{NODEMETRICS}/{name}")
        current["status"] = status
        self.kube.replace(f"{NODEMETRICS}/{name}/status", current)

    def pods(self) -> dict[str, dict[str, Any]]:
        found = self.kube.get(f"/api/v1/namespaces/{self.namespace}/pods")["items"]
        return {p["metadata"]["name"]: p for p in found}

    def events(self) -> list[dict[str, Any]]:
        return list(self.kube.get(f"/api/v1/namespaces/{self.namespace}/events")["items"])


@pytest.fixture
def cluster(kube: rest.Rest, namespace: str) -> Iterator[Cluster]:
    made = Cluster(kube, namespace)
    yield made
    for node in made.nodes:
        kube.delete(f"/api/v1/nodes/{node}")
        try:
            kube.delete(f"{NODEMETRICS}/{node}")
        except rest.ApiError as err:
            if not err.not_found:
                raise


def once(
    control_plane: controlplane.ControlPlane,
    tmp_path: pathlib.Path,
    cluster: Cluster,
    profile: str,
    *flags: str,
) -> subprocess.CompletedProcess[str]:
    config_file = tmp_path / f"config-{uuid.uuid4().hex[:6]}.yaml"
    config_file.write_text(
        "apiVersion: descheduler/v1alpha2\n"
        "kind: DeschedulerConfiguration\n"
        f"nodeSelector: {{matchLabels: {{{LABEL}: {cluster.namespace}}}}}\n"
        + textwrap.dedent(profile)
    )
    return subprocess.run(
        [
            *descheduler_command(),
            "--config",
            str(config_file),
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "--once",
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def test_once_dry_run_runs_a_clean_cycle_and_exits_0(
    control_plane: controlplane.ControlPlane, tmp_path: pathlib.Path, cluster: Cluster
) -> None:
    """Two Ready nodes, DefaultEvictor only: one completed cycle, a summary line, status 0."""
    cluster.add_node("a")
    cluster.add_node("b")
    cluster.run_pod("web", "a", "500m")
    completed = once(control_plane, tmp_path, cluster, "profiles: [{name: p}]\n", "--dry-run")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == [
        "cycle done (dry run): 0 evicted, 0 passed over, 0 plugin errors"
    ]
    assert "descheduler stopped" in completed.stderr


def test_once_with_no_matching_nodes_says_too_few_nodes(
    control_plane: controlplane.ControlPlane, tmp_path: pathlib.Path, cluster: Cluster
) -> None:
    """No node matches the nodeSelector: the cycle is skipped with a reason, status 0."""
    completed = once(control_plane, tmp_path, cluster, "profiles: [{name: p}]\n")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == [
        "cycle done: 0 evicted, 0 passed over, 0 plugin errors; "
        "too_few_nodes: fewer than two ready nodes (0); nothing to do"
    ]


LOWNODELOAD = """\
profiles:
- name: loadaware
  plugins:
    balance:
      enabled: [{name: LowNodeLoad}]
  pluginConfig:
  - name: LowNodeLoad
    args:
      lowThresholds: {cpu: 30}
      highThresholds: {cpu: 70}
      anomalyCondition: {consecutiveAbnormalities: 1}
"""


def test_once_lownodeload_d1_dry_run_then_for_real(
    control_plane: controlplane.ControlPlane, tmp_path: pathlib.Path, cluster: Cluster
) -> None:
    """D1 end to end: --dry-run names a-1000 and writes nothing; a real run evicts it."""
    usage = {
        "a": {
            "a-1200": 1200,
            "a-1000": 1000,
            "a-600": 600,
            "a-400": 400,
            "a-300": 300,
            "a-200": 200,
        },
        "b": {"b-400": 400},
        "c": {"c-1000-x": 1000, "c-1000-y": 1000},
    }
    for node, pods in usage.items():
        cluster.add_node(node)
        for pod, cpu in pods.items():
            cluster.run_pod(pod, node, f"{cpu}m")
        cluster.report_usage(node, pods)
    ns, node_a = cluster.namespace, cluster.node("a")

    dry = once(control_plane, tmp_path, cluster, LOWNODELOAD, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert lines[0].startswith(f"would evict {ns}/a-1000 from node {node_a} (LowNodeLoad")
    assert lines[-1].startswith("cycle done (dry run): 1 evicted")
    assert all(not objects.Pod.from_api(p).is_terminating for p in cluster.pods().values())
    assert cluster.events() == []

    real = once(control_plane, tmp_path, cluster, LOWNODELOAD)
    assert real.returncode == 0, real.stderr
    assert real.stdout.splitlines()[0].startswith(f"evicted {ns}/a-1000 from node {node_a}")
    gone = cluster.pods().get("a-1000")
    assert gone is None or objects.Pod.from_api(gone).is_terminating
    reasons = [(e["involvedObject"]["name"], e["reason"]) for e in cluster.events()]
    assert reasons == [("a-1000", "Descheduled")]
