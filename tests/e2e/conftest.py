"""The real-node cluster: the local control plane plus three nodes, each a real
kubelet and containerd (testbed.localnodes). Built once for tests/e2e and torn down
when the package is done (idle kubelets would tax the other tests); `make e2e`.

Needs root, cgroup v1 and the packages hack/node-setup.sh installs; without
them the fixture FAILS naming the missing piece (it never skips).
"""

from __future__ import annotations

import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kube import rest
from testbed import components, controlplane, localnodes, onlineserver

NODE_NAMES = ("n1", "n2", "n3")


@dataclass(frozen=True, slots=True)
class RealCluster:
    plane: controlplane.ControlPlane
    nodes: dict[str, localnodes.LocalNode]
    kube: rest.Rest


@pytest.fixture(scope="package")
def real_cluster() -> Iterator[RealCluster]:
    try:
        cp_bin = controlplane.find_binaries()
        node_bin = localnodes.NodeBinaries.find()
    except (controlplane.ControlPlaneError, localnodes.NodeError) as err:
        pytest.fail(f"the real-node cluster is unavailable: {err}", pytrace=False)
    with (
        tempfile.TemporaryDirectory(prefix="nodeqos-nodes-") as workdir,
        localnodes.control_plane(
            NODE_NAMES, binaries=cp_bin, controllers=(components.JOB_CONTROLLER,)
        ) as plane,
        localnodes.running_nodes(
            plane,
            NODE_NAMES,
            workdir=Path(workdir),
            binaries=node_bin,
            # the colocation scenario's web server (testbed.onlineserver)
            images=[onlineserver.image_archive(Path(workdir) / "online")],
        ) as nodes,
    ):
        yield RealCluster(
            plane,
            {node.name: node for node in nodes},
            rest.Rest(rest.api_client(plane.kubeconfig), qps=0),
        )


@pytest.fixture
def e2e_namespace(real_cluster: RealCluster) -> Iterator[str]:
    """A fresh namespace; its pods are deleted (and their networks torn down) afterwards."""
    kube = real_cluster.kube
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    kube.create("/api/v1/namespaces", {"metadata": {"name": name}})
    wait_namespace_ready(kube, name)
    yield name
    kube.delete(f"/api/v1/namespaces/{name}")


def wait_namespace_ready(kube: rest.Rest, namespace: str, timeout: float = 60.0) -> None:
    """Wait for the controllers' `default` ServiceAccount and `kube-root-ca.crt`:
    the ServiceAccount admission plugin rejects pods created before the first."""
    wanted = (
        f"/api/v1/namespaces/{namespace}/serviceaccounts/default",
        f"/api/v1/namespaces/{namespace}/configmaps/kube-root-ca.crt",
    )
    deadline = time.monotonic() + timeout
    for path in wanted:
        while True:
            try:
                kube.get(path)
                break
            except rest.ApiError as err:
                if not err.not_found:
                    raise
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"{path} not created within {timeout}s: are kube-controller-manager's "
                        "serviceaccount and root-ca-certificate-publisher controllers running?"
                    ) from None
                time.sleep(0.2)


NODE_IMAGE_SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "node-image.sh"
NODEQOS_IMAGE = "nodeqos.local/nodeqos:dev"


@pytest.fixture(scope="package")
def nodeqos_image(real_cluster: RealCluster) -> str:
    """The nodeqos image built from the Dockerfile (hack/node-image.sh), in every node."""
    done = subprocess.run([str(NODE_IMAGE_SCRIPT)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"cannot build the nodeqos image: {done.stderr.strip()}", pytrace=False)
    archive = done.stdout.strip().splitlines()[-1]
    for node in real_cluster.nodes.values():
        node.ctr("images", "import", archive)
    return NODEQOS_IMAGE
