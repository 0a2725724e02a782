"""Session fixtures: the real local control plane (etcd + kube-apiserver).

A test that needs it and cannot get it FAILS with instructions; it never skips
silently (a green run must mean the API-facing code really ran).
"""

from __future__ import annotations

import http.server
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes.client
import pytest

from kube import rest
from testbed import controlplane


def pytest_configure(config: pytest.Config) -> None:
    # Registered here, not in pyproject.toml, whose digest keys the shared venv.
    config.addinivalue_line(
        "markers", "e2e: needs real nodes (kubelet + containerd, root; hack/node-setup.sh)"
    )
    config.addinivalue_line(
        "markers",
        "cgroupv2vm: boots the cgroup v2 + systemd VM (testbed.vm, root, QEMU); "
        "make e2e-cgroupv2 builds its image",
    )


def _binaries(minor: str | None = None, needed: tuple[str, ...] = ()) -> controlplane.Binaries:
    try:
        return controlplane.find_binaries(minor=minor, needed=needed)
    except controlplane.ControlPlaneError as err:
        pytest.fail(f"the local control plane is unavailable: {err}", pytrace=False)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[controlplane.ControlPlane]:
    """One etcd + kube-apiserver for the whole session, CRDs installed."""
    with controlplane.ControlPlane(_binaries()) as plane:
        yield plane


@pytest.fixture(scope="session")
def cluster() -> Iterator[controlplane.ControlPlane]:
    """A control plane that also runs the real kube-controller-manager and kube-scheduler.

    Kept apart from `control_plane` so the many tests that play those parts by
    hand (or need none of them) stay fast and deterministic. Tests that change
    the scheduler's configuration restart it with `start_scheduler(config)`.
    """
    with controlplane.ControlPlane(_binaries(), scheduler=True, controllers=True) as plane:
        yield plane


@pytest.fixture
def private_control_plane() -> Iterator[controlplane.ControlPlane]:
    """A control plane of the test's own, for tests that stop or restart it."""
    with controlplane.ControlPlane(_binaries()) as plane:
        yield plane


@pytest.fixture(scope="session")
def api_client(control_plane: controlplane.ControlPlane) -> kubernetes.client.ApiClient:
    """A ready `kubernetes` ApiClient with admin rights."""
    return rest.api_client(control_plane.kubeconfig)


@pytest.fixture(scope="session")
def kube(api_client: kubernetes.client.ApiClient) -> rest.Rest:
    """nodeqos's JSON REST client with admin rights, no client-side rate limit."""
    return rest.Rest(api_client, qps=0)


@pytest.fixture
def namespace(kube: rest.Rest) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    kube.create("/api/v1/namespaces", {"metadata": {"name": name}})
    yield name
    kube.delete(f"/api/v1/namespaces/{name}")


class _QuietHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<p>page</p>\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:  # one line per request is noise here
        pass


@pytest.fixture
def page() -> Iterator[str]:
    """A real HTTP server on loopback serving a small page: its URL (the load
    generator's tests in tests/bench and tests/testbed drive it)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
