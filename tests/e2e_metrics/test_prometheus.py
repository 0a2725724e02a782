"""A real Prometheus (github.com/prometheus/prometheus, pinned in hack/prometheus)
answering LowNodeUtilization's `metricsUtilization` Prometheus query.

Prometheus scrapes a prometheus_client exporter started here that publishes one
utilisation gauge per node (labelled `node`, relabelled to `instance` as a
node-exporter setup would); the nodeqos client queries it through the real
HTTP API and maps the vector the way upstream does. Marker `e2e`: the first
run builds Prometheus (about 2 minutes on 2 cores).
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from descheduler.usagesources import prometheus
from testbed import controlplane
from tests.e2e import pods

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
QUERY = "nodeqos_test_node_utilization"


def _binary() -> Path:
    done = subprocess.run(
        [str(ROOT / "hack" / "build-prometheus.sh")], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"hack/build-prometheus.sh failed: {done.stderr[-2000:]}", pytrace=False)
    return Path(done.stdout.strip().splitlines()[-1]) / "prometheus"


@pytest.fixture(scope="module")
def prometheus_url() -> Iterator[str]:
    registry = CollectorRegistry()
    gauge = Gauge(QUERY, "Utilisation of a node in [0, 1].", ["node"], registry=registry)
    gauge.labels("n1").set(0.5695757575757561)
    gauge.labels("n2").set(0.2)
    exporter_port = controlplane.free_port()
    server, _ = start_http_server(exporter_port, addr="127.0.0.1", registry=registry)
    port = controlplane.free_port()
    with tempfile.TemporaryDirectory(prefix="nodeqos-prom-") as tmp:
        config = Path(tmp) / "prometheus.yml"
        config.write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": "1s"},
                    "scrape_configs": [
                        {
                            "job_name": "nodes",
                            "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"]}],
                            "metric_relabel_configs": [
                                {"source_labels": ["node"], "target_label": "instance"}
                            ],
                        }
                    ],
                }
            )
        )
        with (Path(tmp) / "prometheus.log").open("wb") as log:
            proc = subprocess.Popen(
                [
                    str(_binary()),
                    f"--config.file={config}",
                    f"--storage.tsdb.path={Path(tmp) / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            controlplane.terminate(proc)
            server.shutdown()
            server.server_close()


def test_the_query_maps_each_node_to_a_percentage(prometheus_url: str) -> None:
    """Upstream's mapping on a real Prometheus answer: instance -> int(value * 100)."""
    client = prometheus.PrometheusClient(prometheus_url, clock=time.time)

    def answered() -> dict[str, int] | None:
        try:
            found = client.node_usage(QUERY)
        except prometheus.QueryError:
            return None  # not up or not scraped yet
        return found if set(found) == {"n1", "n2"} else None

    assert pods.wait_for(answered, "prometheus to answer for n1 and n2", timeout=60) == {
        "n1": 56,
        "n2": 20,
    }


def test_a_range_vector_query_is_refused_as_upstream_does(prometheus_url: str) -> None:
    """A matrix result (a range selector) is not one value per node: a QueryError."""
    client = prometheus.PrometheusClient(prometheus_url, clock=time.time)
    with pytest.raises(prometheus.QueryError, match='type "vector"'):
        client.node_usage(f"{QUERY}[1m]")
