"""/metrics and /healthz over real HTTP, and the listen address syntax."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from descheduler.app import health, server, telemetry
from kube import telemetry as kube_telemetry


@pytest.fixture
def checks() -> health.Health:
    return health.Health()


@pytest.fixture
def endpoint(checks: health.Health) -> Iterator[tuple[str, CollectorRegistry]]:
    registry = CollectorRegistry()
    app_metrics = telemetry.AppMetrics(registry)
    app_metrics.leader.set(1)
    http = server.HttpServer(("127.0.0.1", 0), registry, checks)
    host, port = http.address
    yield f"http://{host}:{port}", registry
    http.close()


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read().decode()


def test_metrics_has_build_info_and_leader(endpoint: tuple[str, CollectorRegistry]) -> None:
    """The registry main built, in the Prometheus text format."""
    url, _ = endpoint
    status, content_type, body = get(url + "/metrics")
    assert status == 200
    assert content_type.startswith("text/plain")
    assert f'nodeqos_descheduler_build_info{{version="{kube_telemetry.version()}"}} 1.0' in body
    assert "nodeqos_descheduler_leader 1.0" in body


def test_healthz_is_200_when_every_component_is_ready(
    endpoint: tuple[str, CollectorRegistry], checks: health.Health
) -> None:
    """Each component answers for itself; all ready is 200."""
    checks.register("informers", lambda: health.State(True, "every cache synced"))
    checks.register("leader-election", lambda: health.State(True, "follower"))
    status, content_type, body = get(endpoint[0] + "/healthz")
    assert (status, content_type) == (200, "application/json")
    assert json.loads(body) == {
        "ready": True,
        "components": {
            "informers": {"ready": True, "detail": "every cache synced"},
            "leader-election": {"ready": True, "detail": "follower"},
        },
    }


def test_healthz_is_503_when_one_component_is_not_ready(
    endpoint: tuple[str, CollectorRegistry], checks: health.Health
) -> None:
    """One component not ready (or a probe that raises) makes the whole answer 503."""
    checks.register("informers", lambda: health.State(False, "caches not synced yet: pods"))

    def broken() -> health.State:
        raise RuntimeError("boom")

    checks.register("descheduling", broken)
    status, _, body = get(endpoint[0] + "/healthz")
    assert status == 503
    parsed = json.loads(body)
    assert parsed["ready"] is False
    assert parsed["components"]["descheduling"] == {
        "ready": False,
        "detail": "probe failed: RuntimeError: boom",
    }


def test_no_component_is_not_healthy(endpoint: tuple[str, CollectorRegistry]) -> None:
    """Nothing registered yet: not ready."""
    assert get(endpoint[0] + "/healthz")[0] == 503


def test_unknown_path_is_404(endpoint: tuple[str, CollectorRegistry]) -> None:
    assert get(endpoint[0] + "/nope")[0] == 404


def test_a_component_name_is_taken_once(checks: health.Health) -> None:
    checks.register("x", lambda: health.State(True))
    with pytest.raises(ValueError, match="already registered"):
        checks.register("x", lambda: health.State(True))


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        pytest.param(":10258", ("0.0.0.0", 10258), id="port-only"),
        pytest.param("127.0.0.1:0", ("127.0.0.1", 0), id="any-free-port"),
        pytest.param("[::1]:8080", ("::1", 8080), id="ipv6"),
        pytest.param("localhost:80", ("localhost", 80), id="hostname"),
    ],
)
def test_listen_addresses(text: str, parsed: tuple[str, int]) -> None:
    assert server.parse_address(text) == parsed


@pytest.mark.parametrize("text", ["10258", "host:", ":99999", "a:b:1"])
def test_bad_listen_addresses(text: str) -> None:
    with pytest.raises(ValueError):
        server.parse_address(text)


def test_nothing_registers_at_import() -> None:
    """Two daemons in one process each get their own metrics (no global registry)."""
    first, second = CollectorRegistry(), CollectorRegistry()
    telemetry.AppMetrics(first)
    telemetry.AppMetrics(second)
    assert first.get_sample_value("nodeqos_descheduler_leader") == 0
