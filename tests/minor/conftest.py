"""The suite's parts that differ on the oldest supported minor run here on its real
kube-apiserver (built from hack/minor/v<oldest>/ by hack/build-minor.sh, cached).

This directory overrides the control-plane fixtures (`control_plane`,
`private_control_plane`, `api_client`, `kube`), so a test module imported into
it runs unchanged against the oldest minor's API server: the same assertions,
another server. The rest of the suite keeps the pinned newest minor; `make
e2e-matrix` runs the real-node suite on every minor.
"""

from __future__ import annotations

from collections.abc import Iterator

import kubernetes
import pytest

from kube import rest
from testbed import controlplane
from tests.conftest import _binaries

OLDEST = controlplane.supported_minors()[0]


def _oldest_binaries() -> controlplane.Binaries:
    return _binaries(minor=OLDEST, needed=("kube-apiserver",))


@pytest.fixture(scope="session")
def control_plane() -> Iterator[controlplane.ControlPlane]:
    """The oldest minor's etcd + kube-apiserver for this directory, CRDs installed."""
    with controlplane.ControlPlane(_oldest_binaries()) as plane:
        yield plane


@pytest.fixture
def private_control_plane() -> Iterator[controlplane.ControlPlane]:
    """An oldest-minor control plane of the test's own."""
    with controlplane.ControlPlane(_oldest_binaries()) as plane:
        yield plane


@pytest.fixture(scope="session")
def api_client(control_plane: controlplane.ControlPlane) -> kubernetes.client.ApiClient:
    return rest.api_client(control_plane.kubeconfig)


@pytest.fixture(scope="session")
def kube(api_client: kubernetes.client.ApiClient) -> rest.Rest:
    return rest.Rest(api_client, qps=0)
