"""The agent's Prometheus metrics and its /metrics and /healthz endpoint."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from agent import health, server, telemetry
from metriccache import MetricCache, Sample, kinds
from tests.agent.builders import T0, FakeClock


def test_nothing_registers_at_import_time() -> None:
    """Importing every agent module leaves the global default registry without our metrics."""
    code = (
        "import prometheus_client, agent.cli, agent.standalone, agent.telemetry, agent.server\n"
        "names = [m.name for m in prometheus_client.REGISTRY.collect()]\n"
        "assert not any(n.startswith('nodeqos') for n in names), names\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_build_info_and_counters_start_on_the_given_registry() -> None:
    """AgentMetrics puts build info and its counters on the registry it is handed."""
    registry = CollectorRegistry()
    metrics = telemetry.AgentMetrics(registry, build_version="1.2.3")
    assert registry.get_sample_value("nodeqos_agent_build_info", {"version": "1.2.3"}) == 1
    metrics.missed(2)
    assert registry.get_sample_value("nodeqos_agent_collect_missed_ticks_total") == 2


def test_node_gauges_read_the_latest_cache_values() -> None:
    """Node CPU and memory gauges show the newest sample; stale samples are not shown."""
    clock = FakeClock()
    cache = MetricCache(clock=clock.time)
    registry = CollectorRegistry()
    registry.register(telemetry.NodeUsageCollector(cache, clock, max_age=5.0))
    assert registry.get_sample_value("nodeqos_agent_node_cpu_usage_cores") is None
    cache.append(
        [
            Sample(kinds.NODE_CPU_USAGE, {}, T0 - 1, 1.0),
            Sample(kinds.NODE_CPU_USAGE, {}, T0, 1.75),
            Sample(kinds.NODE_MEMORY_USAGE, {}, T0, 123456 * 4096),  # pages: exact in float32
        ]
    )
    assert registry.get_sample_value("nodeqos_agent_node_cpu_usage_cores") == 1.75
    assert registry.get_sample_value("nodeqos_agent_node_memory_usage_bytes") == 123456 * 4096
    clock.advance(6.0)
    assert registry.get_sample_value("nodeqos_agent_node_cpu_usage_cores") is None


@pytest.fixture
def endpoint() -> Iterator[tuple[str, health.Readiness]]:
    registry = CollectorRegistry()
    telemetry.AgentMetrics(registry, build_version="9.9.9")
    readiness = health.Readiness()
    srv = server.MetricsServer("127.0.0.1", 0, registry, readiness)
    host, port = srv.address
    yield f"http://{host}:{port}", readiness
    srv.close()


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as err:
        body = err.read().decode()
        content_type = err.headers["Content-Type"]
        err.close()
        return err.code, content_type, body


def test_metrics_are_served(endpoint: tuple[str, health.Readiness]) -> None:
    """/metrics renders the registry in the Prometheus text format."""
    status, content_type, body = _get(endpoint[0] + "/metrics")
    assert status == 200 and content_type.startswith("text/plain")
    assert 'nodeqos_agent_build_info{version="9.9.9"} 1.0' in body


def test_healthz_reports_each_component(endpoint: tuple[str, health.Readiness]) -> None:
    """503 with the list while a component is not ready, 200 once all are."""
    url, readiness = endpoint
    collector = readiness.register("collector", "no round yet")
    cache = readiness.register("metriccache")
    cache.set(True, "open")
    status, content_type, body = _get(url + "/healthz")
    assert (status, content_type) == (503, "application/json")
    assert json.loads(body) == {
        "ready": False,
        "components": {
            "collector": {"ready": False, "detail": "no round yet"},
            "metriccache": {"ready": True, "detail": "open"},
        },
    }
    collector.set(True, "round 0 ok")
    status, _, body = _get(url + "/healthz")
    assert status == 200 and json.loads(body)["ready"] is True


def test_livez_stays_up_while_unready(endpoint: tuple[str, health.Readiness]) -> None:
    """/livez answers 200 while /healthz is 503 (an API outage must not restart the agent)."""
    url, readiness = endpoint
    readiness.register("reporter", "API server unreachable")
    assert _get(url + "/healthz")[0] == 503
    assert _get(url + "/livez")[:1] == (200,)


def test_unknown_path_is_404(endpoint: tuple[str, health.Readiness]) -> None:
    """Anything else is not found."""
    assert _get(endpoint[0] + "/nope")[0] == 404


def test_component_names_are_unique() -> None:
    """Registering a taken component name is an error."""
    readiness = health.Readiness()
    readiness.register("collector")
    with pytest.raises(ValueError, match="already registered"):
        readiness.register("collector")
    assert not health.Readiness().ready()  # nothing registered: not ready
