"""Command lines and configuration for the control plane's optional components.

`testbed.controlplane.ControlPlane` runs etcd and kube-apiserver always, and, when
asked, the real kube-scheduler and kube-controller-manager built from the same
pinned module. This module holds what is specific to those two, as pure
functions over paths and ports, so the lifecycle code stays in one place:

- each runs under its own identity (`system:kube-scheduler`,
  `system:kube-controller-manager`), the users the API server's bootstrap RBAC
  policy grants exactly their rights; the controller manager then hands every
  controller a ServiceAccount of its own (`--use-service-account-credentials`),
  as in a production cluster;
- leader election is off (one replica each, a throwaway cluster);
- both serve /healthz on a loopback port of their own with a self-signed
  certificate (the readiness check does not verify it).

The controllers: the ones nodeqos relies on (workloads, PDB status, garbage
collection, service accounts and the root CA ConfigMap, namespace clean-up). The node lifecycle
controller is left out by default: the process-based nodes of the demo and of
most tests have no kubelet renewing their Lease, and the controller would taint
them unreachable and evict their pods after 40 s. Real-node setups add it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

SCHEDULER_USER = "system:kube-scheduler"
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"

# Names as kube-controller-manager --controllers takes them (v1.37 spelling).
DEFAULT_CONTROLLERS: tuple[str, ...] = (
    "daemonset-controller",
    "deployment-controller",
    "disruption-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "replicaset-controller",
    # kube-root-ca.crt in every namespace: the CA half of pods' in-cluster config.
    "root-ca-certificate-publisher-controller",
    "serviceaccount-controller",
)
NODE_LIFECYCLE_CONTROLLER = "node-lifecycle-controller"
# A Service's EndpointSlices: what the API server dials for a webhook or an aggregated
# API served from pods (testbed.localnodes.control_plane).
ENDPOINTSLICE_CONTROLLER = "endpointslice-controller"
# What a cluster of real nodes runs (testbed.localnodes.control_plane).
REAL_NODE_CONTROLLERS: tuple[str, ...] = (
    *DEFAULT_CONTROLLERS,
    NODE_LIFECYCLE_CONTROLLER,
    ENDPOINTSLICE_CONTROLLER,
)
# Runs Jobs (the colocation scenario's batch work, testbed.colocationloop).
JOB_CONTROLLER = "job-controller"

SCHEDULER_CONFIG_API = "kubescheduler.config.k8s.io/v1"


def scheduler_config(kubeconfig: Path, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A KubeSchedulerConfiguration: `base` (profiles, extenders, ...) on our connection.

    `base` is what a user would ship (for example deploy/kube-scheduler/*.yaml);
    the connection to this control plane and leader election are ours to set.
    """
    config: dict[str, Any] = copy.deepcopy(dict(base or {}))
    config.setdefault("apiVersion", SCHEDULER_CONFIG_API)
    config.setdefault("kind", "KubeSchedulerConfiguration")
    if config["kind"] != "KubeSchedulerConfiguration":
        raise ValueError(
            f"scheduler config has kind {config['kind']!r}; want KubeSchedulerConfiguration"
        )
    config["clientConnection"] = {
        **config.get("clientConnection", {}),
        "kubeconfig": str(kubeconfig),
        "qps": 200,
        "burst": 400,
    }
    config["leaderElection"] = {"leaderElect": False}
    return config


def scheduler_args(config_file: Path, kubeconfig: Path, port: int, cert_dir: Path) -> list[str]:
    return [
        f"--config={config_file}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
        "--v=1",
    ]


def controller_manager_args(
    kubeconfig: Path,
    port: int,
    cert_dir: Path,
    pki: Path,
    controllers: Sequence[str],
) -> list[str]:
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
        "--leader-elect=false",
        "--use-service-account-credentials=true",
        f"--controllers={','.join(controllers)}",
        f"--root-ca-file={pki / 'ca.crt'}",
        # Quick reactions in a cluster that lives for one test run.
        "--concurrent-deployment-syncs=5",
        "--concurrent-replicaset-syncs=5",
        "--v=1",
    ]


def write_scheduler_config(path: Path, config: Mapping[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(dict(config), sort_keys=False))
    return path
