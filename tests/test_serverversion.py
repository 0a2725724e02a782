"""Kubernetes 1.34-1.37 (issue 35): every daemon reads the API server's version at start,
refuses an older server with exit 2 and a message saying what it supports, and carries on
when the server does not say.

No API server older than 1.34 is built here (hack/ pins 1.37), so the refusals are
checked against a loopback HTTP server that answers `GET /version` as an old one would
(and 404 to everything else); the real control plane checks the accepting path.
"""

from __future__ import annotations

import http.server
import json
import logging
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import kubernetes.client
import pytest

from kube import rest, serverversion
from testbed import controlplane

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("info", "minor", "shown"),
    [
        ({"major": "1", "minor": "37", "gitVersion": "v1.37.1"}, (1, 37), "v1.37.1"),
        ({"major": "1", "minor": "34+", "gitVersion": "v1.34.2-gke.1234000"}, (1, 34), "v1.34.2-gke.1234000"),
        ({"major": "1", "minor": "35", "gitVersion": "v1.35.3-eks-3cfe0ce"}, (1, 35), "v1.35.3-eks-3cfe0ce"),
        ({"major": "", "minor": "", "gitVersion": "v1.36.0-k3s1"}, (1, 36), "v1.36.0-k3s1"),
        ({"major": "1", "minor": "33"}, (1, 33), "1.33"),
    ],
)  # fmt: skip
def test_parse_reads_the_minor_whatever_the_distribution_appends(
    info: dict[str, str], minor: tuple[int, int], shown: str
) -> None:
    version = serverversion.parse(info)
    assert (version.minor.major, version.minor.minor) == minor
    assert str(version) == shown


@pytest.mark.parametrize("info", [{}, {"major": "x", "minor": "y", "gitVersion": "main"}])
def test_parse_refuses_a_body_without_a_version(info: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="no version"):
        serverversion.parse(info)


DISCOVERY: dict[str, dict[str, object]] = {
    "/api": {"kind": "APIVersions", "versions": ["v1"]},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": []},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
}


class _VersionServer:
    """A loopback HTTP server answering `GET /version` with `minor` and discovery with
    an empty core group, 404 otherwise;
    with `hang`, it accepts connections and never answers."""

    def __init__(self, minor: str = "33", *, hang: bool = False) -> None:
        self.minor = minor
        self.hang = hang
        self._released = threading.Event()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if owner.hang:
                    owner._released.wait(60)
                    return
                path = self.path.split("?")[0]
                code = 200
                body: dict[str, object]
                if path == "/version":
                    body = {
                        "major": "1",
                        "minor": owner.minor,
                        "gitVersion": f"v1.{owner.minor}.9",
                    }
                elif path in DISCOVERY:  # enough for helm to read the server's capabilities
                    body = DISCOVERY[path]
                else:
                    code, body = 404, {"kind": "Status", "code": 404, "reason": "NotFound"}
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            f'clusters: [{{name: c, cluster: {{server: "{self.url}"}}}}]\n'
            "users: [{name: u, user: {token: t}}]\n"
            "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
            "current-context: x\n"
        )
        return path

    def client(self) -> rest.Rest:
        config = kubernetes.client.Configuration()
        config.host = self.url
        return rest.Rest(kubernetes.client.ApiClient(config), qps=0)

    def close(self) -> None:
        self._released.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@pytest.fixture
def old_server() -> Iterator[_VersionServer]:
    server = _VersionServer("33")
    yield server
    server.close()


# each daemon's command line, up to the point where it reaches the API server
DAEMONS = {
    "nodeqos-agent": ["agent", "--node-name", "n1"],
    "nodeqos-manager": ["manager"],
    "nodeqos-descheduler": [
        "descheduler.cli",
        "--config",
        str(REPO / "tests" / "fixtures" / "descheduler" / "koordinator-lownodeload.yaml"),
    ],
    "nodeqos-scheduler-extender": ["extender.cli"],
}


@pytest.mark.parametrize("component", sorted(DAEMONS))
def test_each_daemon_refuses_a_server_older_than_1_34_with_exit_2(
    component: str, old_server: _VersionServer, tmp_path: Path
) -> None:
    """The real process, its real flags: exit 2, the version found, the range, the fix."""
    kubeconfig = old_server.kubeconfig(tmp_path / "kubeconfig")
    done = subprocess.run(
        [sys.executable, "-m", *DAEMONS[component], "--kubeconfig", str(kubeconfig)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    message = " ".join(done.stderr.split())  # click wraps long lines
    assert (
        f"the API server runs Kubernetes v1.33.9, older than 1.34: {component} supports "
        "Kubernetes 1.34-1.37. Upgrade the cluster to 1.34 or later" in message
    ), done.stderr


def test_a_newer_server_is_a_warning_not_a_refusal(caplog: pytest.LogCaptureFixture) -> None:
    server = _VersionServer("38")
    try:
        with caplog.at_level(logging.WARNING, logger="kube.serverversion"):
            found = serverversion.check(server.client(), "nodeqos-test")
    finally:
        server.close()
    assert found is not None and str(found.minor) == "1.38"
    assert "newer than 1.37, the newest minor nodeqos is tested on" in caplog.text


def test_a_server_that_hangs_costs_one_bounded_wait_and_is_let_through(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Accepts the connection, never answers: check gives up at CHECK_TIMEOUT and carries on."""
    monkeypatch.setattr(serverversion, "CHECK_TIMEOUT", 1.0)
    server = _VersionServer(hang=True)
    try:
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="kube.serverversion"):
            found = serverversion.check(server.client(), "nodeqos-test")
        waited = time.monotonic() - started
    finally:
        server.close()
    assert found is None
    assert waited < 1.0 + 4.0  # the timeout plus a loaded machine's slack
    assert "cannot read the API server's version" in caplog.text


def test_a_server_that_refuses_connections_is_let_through() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    config = kubernetes.client.Configuration()
    config.host = f"http://127.0.0.1:{port}"
    client = rest.Rest(kubernetes.client.ApiClient(config), qps=0)
    assert serverversion.check(client, "nodeqos-test") is None


@pytest.mark.controlplane
def test_the_real_api_server_is_inside_the_range(
    kube: rest.Rest, control_plane: controlplane.ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    """hack/ pins 1.37, the newest supported minor: accepted, and logged as found."""
    with caplog.at_level(logging.INFO, logger="kube.serverversion"):
        found = serverversion.check(kube, "nodeqos-test")
    assert found is not None
    assert serverversion.OLDEST <= found.minor <= serverversion.NEWEST
    assert found.git_version.startswith("v1.37.")
    assert f"the API server runs Kubernetes {found.git_version} (supported: 1.34-1.37)" in (
        caplog.text
    )
