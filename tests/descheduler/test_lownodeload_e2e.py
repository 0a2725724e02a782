"""LowNodeLoad end to end against the real local control plane.

Three Nodes (hot A, cool B, C between the marks), ReplicaSet-owned Running
pods bound to them, NodeMetrics created through the API with their status
written through /status, and a PodDisruptionBudget (minAvailable = replicas)
on the workload whose pod is A's first candidate. The descheduler then runs
one cycle with a real configuration file:

- as the CLI runs it, a separate process (`python -m descheduler.cli --once`);
- in-process, wired as the daemon wires it (InformerSource, Eviction API
  backend with an Event recorder), where the CycleReport can be read.

Either way the PDB-protected pod is refused (pdb_blocked) and the next
candidate is evicted through the Eviction API: it gets a deletionTimestamp and
a `Descheduled` Event naming LowNodeLoad. Nodes carry a label unique to the
test and the configuration's nodeSelector picks only them.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from descheduler import config, evictions, framework, plugins
from descheduler.framework import Reason
from descheduler.plugins import in_tree
from kube import events, rest
from testbed import controlplane, localcluster
from tests import builders

pytestmark = pytest.mark.controlplane

LABEL = "nodeqos-test"
NODEMETRICS = rest.object_path("slo.koordinator.sh", "v1alpha1", "nodemetrics")
# node -> pod -> (workload, CPU millicores the NodeMetric reports)
LAYOUT: Mapping[str, Mapping[str, tuple[str, int]]] = {
    "a": {
        "web-0": ("web", 1000),  # covers A's 900m excess best, but its PDB allows no disruption
        "a1200": ("big", 1200),
        "a600": ("a600", 600),
        "a400": ("a400", 400),
        "a300": ("a300", 300),
        "a200": ("a200", 200),
    },  # 3700m of 4000m: 92.5%
    "b": {"b400": ("b400", 400)},  # 10%
    "c": {"c2000": ("c2000", 2000)},  # 50%
}


@dataclass
class Cluster:
    kube: rest.Rest
    namespace: str
    nodes: list[str] = field(default_factory=list)

    def node(self, suffix: str) -> str:
        return f"{self.namespace}-{suffix}"

    def pod(self, name: str) -> dict[str, Any]:
        return dict(self.kube.get(f"/api/v1/namespaces/{self.namespace}/pods/{name}"))

    def events(self) -> list[dict[str, Any]]:
        return list(self.kube.get(f"/api/v1/namespaces/{self.namespace}/events")["items"])

    def add_node(self, suffix: str) -> None:
        name = self.node(suffix)
        localcluster.register_node(self.kube, name, labels={LABEL: self.namespace})
        # The API server taints new nodes not-ready:NoSchedule; nothing here lifts it.
        self.kube.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": None}})
        self.nodes.append(name)

    def run_pod(self, name: str, suffix: str, workload: str) -> None:
        body = builders.make_pod_dict(
            name,
            namespace=self.namespace,
            node=self.node(suffix),
            owner="ReplicaSet",
            owner_name=workload,
            labels={"app": workload},
        )
        body["metadata"] = {
            k: v for k, v in body["metadata"].items() if k in ("name", "labels", "ownerReferences")
        }
        body.pop("status")
        created = self.kube.create(f"/api/v1/namespaces/{self.namespace}/pods", body)
        localcluster.mark_running(self.kube, created)

    def report_usage(self, suffix: str, pods: Mapping[str, int]) -> None:
        """Create the node's NodeMetric and write a fresh status through /status."""
        name = self.node(suffix)
        metric = builders.make_nodemetric_dict(
            name,
            pods={f"{self.namespace}/{pod}": cpu for pod, cpu in pods.items()},
            update_time=datetime.now(UTC).replace(microsecond=0),
        )
        created = self.kube.create(NODEMETRICS, {**metric, "status": {}})
        created["status"] = metric["status"]
        self.kube.replace(f"{NODEMETRICS}/{name}/status", created)


@pytest.fixture
def cluster(kube: rest.Rest, namespace: str) -> Iterator[Cluster]:
    """The scenario above, built fresh for the test; nodes and NodeMetrics removed afterwards."""
    made = Cluster(kube, namespace)
    try:
        for suffix, pods in LAYOUT.items():
            made.add_node(suffix)
            for pod, (workload, _) in pods.items():
                made.run_pod(pod, suffix, workload)
            made.report_usage(suffix, {pod: cpu for pod, (_, cpu) in pods.items()})
        kube.create(
            f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
            {
                "metadata": {"name": "web"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
            },
        )
        pdb = localcluster.sync_pdb_status(kube, namespace, "web")
        assert pdb["status"]["disruptionsAllowed"] == 0
        yield made
    finally:
        for node in made.nodes:
            kube.delete(f"/api/v1/nodes/{node}")
            try:
                kube.delete(f"{NODEMETRICS}/{node}")
            except rest.ApiError as err:
                if not err.not_found:
                    raise


def config_file(path: Path, namespace: str) -> Path:
    """A Koordinator-style configuration: LowNodeLoad on D1's marks, our nodes only."""
    document = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerConfiguration",
        "nodeSelector": f"{LABEL}={namespace}",
        "profiles": [
            {
                "name": "koord-descheduler",
                "plugins": {"balance": {"enabled": [{"name": "LowNodeLoad"}]}},
                "pluginConfig": [
                    {
                        "name": "LowNodeLoad",
                        "args": {
                            "apiVersion": "descheduler/v1alpha2",
                            "kind": "LowNodeLoadArgs",
                            "lowThresholds": {"cpu": 30},
                            "highThresholds": {"cpu": 70},
                            "anomalyCondition": {"consecutiveAbnormalities": 1},
                        },
                    }
                ],
            }
        ],
    }
    target = path / "descheduler.yaml"
    target.write_text(yaml.safe_dump(document, sort_keys=False))
    return target


def assert_evicted_through_the_api(cluster: Cluster) -> None:
    """a1200 is terminating with a Descheduled Event; the PDB-protected web-0 is untouched."""
    assert cluster.pod("a1200")["metadata"].get("deletionTimestamp")
    assert not cluster.pod("web-0")["metadata"].get("deletionTimestamp")
    untouched = ("a600", "a400", "a300", "a200", "b400", "c2000")
    assert not any(cluster.pod(p)["metadata"].get("deletionTimestamp") for p in untouched)
    descheduled = [e for e in cluster.events() if e["reason"] == evictions.EVENT_REASON]
    [event] = descheduled
    assert event["involvedObject"]["name"] == "a1200"
    message = event["message"]
    a, b = cluster.node("a"), cluster.node("b")
    assert f"pod evicted from node {a} towards node {b} by LowNodeLoad" in message
    assert message.endswith(
        f"node {cluster.node('a')} is overutilized: cpu usage 92.50% > high mark 70.00%"
    )


def test_descheduler_process_evicts_the_right_pod(
    cluster: Cluster, control_plane: controlplane.ControlPlane, tmp_path: Path
) -> None:
    """`python -m descheduler.cli --config F --kubeconfig K --once` evicts a1200, not web-0."""
    cli = [sys.executable, "-m", "descheduler.cli"]
    path = config_file(tmp_path, cluster.namespace)
    done = subprocess.run(
        [*cli, "--config", str(path), "--kubeconfig", str(control_plane.kubeconfig), "--once"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"{cluster.namespace}/a1200" in done.stdout, done.stdout
    assert_evicted_through_the_api(cluster)


def test_in_process_cycle_reports_pdb_blocked_then_evicts(
    cluster: Cluster, control_plane: controlplane.ControlPlane, tmp_path: Path
) -> None:
    """Wired as the daemon wires it: web-0 pdb_blocked (429), a1200 evicted; projections 2500/1600m."""
    cfg = config.load_config(config_file(tmp_path, cluster.namespace), plugins=in_tree())
    client = rest.Rest.from_kubeconfig(control_plane.kubeconfig)
    source = framework.InformerSource(client).start()
    try:
        assert source.wait_synced(30)
        backend = evictions.EvictionAPI(
            client,
            events.Recorder(client, evictions.COMPONENT, host=f"test-{uuid.uuid4().hex[:6]}"),
        )
        runner = framework.Runner.from_config(
            cfg,
            plugins.registry(),
            source=source,
            backend=backend,
            metrics=framework.Metrics(CollectorRegistry()),
        )
        report = runner.run_once()
    finally:
        source.stop()
    ns = cluster.namespace
    assert report.evicted_pods == [f"{ns}/a1200"]
    assert [(s.pod, s.plugin, s.reason_code) for s in report.skipped] == [
        (f"{ns}/web-0", "LowNodeLoad", Reason.PDB_BLOCKED)
    ]
    assert "disruption budget" in report.skipped[0].detail
    usage = {
        p.node: (p.usage_before["cpu"], p.usage_after["cpu"])
        for p in report.projections
        if p.usage_before is not None and p.usage_after is not None
    }
    assert usage == {cluster.node("a"): (3700, 2500), cluster.node("b"): (400, 1600)}
    assert_evicted_through_the_api(cluster)
