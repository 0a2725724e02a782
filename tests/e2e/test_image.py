"""The image built from the repository's Dockerfile runs the agent on a real node
(issue 15, part of test 1): privileged, hostPID, the host's cgroups and /proc
mounted as in deploy/daemonset.yaml; the kubelet's readiness probe on /healthz
passes and /metrics shows pod collection rounds without errors."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import pods
from tests.e2e.conftest import RealCluster

pytestmark = [pytest.mark.e2e, pytest.mark.controlplane, pytest.mark.slow]

NODE = "n3"
PORT = 9316


def agent_pod(image: str, cgroup_parent: str) -> dict[str, Any]:
    mounts = {"cgroup": ("/sys/fs/cgroup", "/host/sys/fs/cgroup"), "proc": ("/proc", "/host/proc")}
    return {
        "metadata": {"name": "agent"},
        "spec": {
            "nodeName": NODE,
            "hostPID": True,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "agent",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["nodeqos-agent"],
                    "args": [
                        "--standalone",
                        f"--node-name={NODE}",
                        "--cgroup-root=/host/sys/fs/cgroup",
                        "--proc-root=/host/proc",
                        f"--kubelet-cgroup-root=/{cgroup_parent}",
                        "--metric-cache-path=/var/lib/nodeqos/metriccache.db",
                        f"--metrics-addr=:{PORT}",
                    ],
                    "ports": [{"name": "metrics", "containerPort": PORT}],
                    "readinessProbe": {
                        "httpGet": {"path": "/healthz", "port": "metrics"},
                        "periodSeconds": 2,
                    },
                    "securityContext": {
                        "privileged": True,
                        "runAsUser": 0,
                        "readOnlyRootFilesystem": True,
                    },
                    "volumeMounts": [
                        *(
                            {"name": n, "mountPath": inside, "readOnly": n == "proc"}
                            for n, (_, inside) in mounts.items()
                        ),
                        {"name": "state", "mountPath": "/var/lib/nodeqos"},
                    ],
                }
            ],
            "volumes": [
                *({"name": n, "hostPath": {"path": host}} for n, (host, _) in mounts.items()),
                {"name": "state", "emptyDir": {}},
            ],
            "terminationGracePeriodSeconds": 5,
        },
    }


def test_dockerfile_image_runs_the_agent_on_a_real_node(
    real_cluster: RealCluster, nodeqos_image: str, e2e_namespace: str
) -> None:
    """The agent container from the Dockerfile becomes Ready and collects the node's pods."""
    kube = real_cluster.kube
    ns_pods = f"/api/v1/namespaces/{e2e_namespace}/pods"
    kube.create(ns_pods, pods.pod("busy", node=NODE, command=pods.BUSY_LOOP, cpu="200m"))
    kube.create(ns_pods, agent_pod(nodeqos_image, real_cluster.nodes[NODE].cgroup_parent))
    (agent, _busy) = pods.wait_running(kube, e2e_namespace, ["agent", "busy"])
    url = f"http://{agent['status']['podIP']}:{PORT}/metrics"

    def scraped() -> str | None:
        with urllib.request.urlopen(url, timeout=5) as resp:
            text: str = resp.read().decode()
        rounds = [
            line
            for line in text.splitlines()
            if line.startswith('nodeqos_agent_collect_duration_seconds_count{collector="pods"}')
        ]
        return text if rounds and float(rounds[0].split()[-1]) >= 5 else None

    text = pods.wait_for(scraped, "five pod collection rounds", timeout=60)
    # "gone" is a pod that left between listing and reading (earlier tests' pods being
    # deleted on the same node): normal churn. Any other reason is a real error.
    errors = [
        line
        for line in text.splitlines()
        if line.startswith('nodeqos_agent_collector_errors_total{collector="pods"')
        and 'reason="gone"' not in line
    ]
    assert not errors, text
    node_cpu = [
        line for line in text.splitlines() if line.startswith("nodeqos_agent_node_cpu_usage_cores ")
    ]
    assert node_cpu and float(node_cpu[0].split()[-1]) > 0.1, node_cpu


def agent_daemonset(image: str, state_dir: str) -> dict[str, Any]:
    """The standalone agent as a DaemonSet: one cgroup root per node via $(NODE_NAME),
    the metric cache in a per-node hostPath dir (subPathExpr) that outlives the pod."""
    template = agent_pod(image, "nodeqos-$(NODE_NAME)")
    spec = template["spec"]
    del spec["nodeName"]
    container = spec["containers"][0]
    container["env"] = [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    ]
    container["args"] = [
        "--node-name=$(NODE_NAME)" if a.startswith("--node-name=") else a for a in container["args"]
    ]
    for mount in container["volumeMounts"]:
        if mount["name"] == "state":
            mount["subPathExpr"] = "$(NODE_NAME)"
    spec["volumes"] = [
        v
        if v["name"] != "state"
        else {"name": "state", "hostPath": {"path": state_dir, "type": "DirectoryOrCreate"}}
        for v in spec["volumes"]
    ]
    labels = {"app": "nodeqos-agent-e2e"}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def test_daemonset_agents_ready_everywhere_and_restarted_when_killed(
    real_cluster: RealCluster, nodeqos_image: str, e2e_namespace: str, tmp_path: Path
) -> None:
    """One Ready agent per node; a deleted agent pod comes back and writes on into its cache."""
    kube = real_cluster.kube
    kube.create(
        f"/apis/apps/v1/namespaces/{e2e_namespace}/daemonsets",
        agent_daemonset(nodeqos_image, str(tmp_path / "state")),
    )
    ns_pods = f"/api/v1/namespaces/{e2e_namespace}/pods"

    def ready_agents() -> dict[str, dict[str, Any]] | None:
        found = {}
        for p in kube.get(ns_pods, labelSelector="app=nodeqos-agent-e2e")["items"]:
            ready = [c for c in p["status"].get("conditions", []) if c["type"] == "Ready"]
            if (
                p["metadata"].get("deletionTimestamp") is None
                and ready
                and ready[0]["status"] == "True"
            ):
                found[p["spec"]["nodeName"]] = p
        return found if set(found) == set(real_cluster.nodes) else None

    before = pods.wait_for(ready_agents, "a Ready agent on every node", timeout=120)
    cache = tmp_path / "state" / "n1" / "metriccache.db"
    pods.wait_for(
        lambda: cache.exists() and cache.stat().st_size > 0, "n1's metric cache on the host"
    )
    killed = before["n1"]["metadata"]["uid"]
    kube.delete(f"{ns_pods}/{before['n1']['metadata']['name']}")
    after = pods.wait_for(
        lambda: (r := ready_agents()) and r["n1"]["metadata"]["uid"] != killed and r,
        "a new Ready agent on n1",
        timeout=120,
    )
    assert {n: p["metadata"]["uid"] for n, p in after.items() if n != "n1"} == {
        n: p["metadata"]["uid"] for n, p in before.items() if n != "n1"
    }

    # The new agent writes on into the cache the killed one left on the host
    # (SQLite: into the database or its write-ahead log beside it).
    def written() -> int:
        return max(f.stat().st_mtime_ns for f in cache.parent.glob("metriccache.db*"))

    left = written()
    pods.wait_for(lambda: written() > left, "the new agent writing n1's cache")
