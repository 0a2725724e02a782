"""The image built from the repository's Dockerfile runs the agent on a real node
(issue 15, part of test 1): privileged, hostPID, the host's cgroups and /proc
mounted as in deploy/daemonset.yaml; the kubelet's readiness probe on /healthz
passes and /metrics shows pod collection rounds without errors."""

from __future__ import annotations

import urllib.request
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
    assert 'nodeqos_agent_collector_errors_total{collector="pods"' not in text, text
    node_cpu = [
        line for line in text.splitlines() if line.startswith("nodeqos_agent_node_cpu_usage_cores ")
    ]
    assert node_cpu and float(node_cpu[0].split()[-1]) > 0.1, node_cpu
