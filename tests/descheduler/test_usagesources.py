"""Reading actual usage for metricsUtilization: metrics.k8s.io lists and the Prometheus query API."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from descheduler import config, plugins, usagesources
from descheduler.usagesources import metricsserver, podusage, prometheus
from kube import objects, rest
from kube.quantity import Resources
from tests import builders
from tests.descheduler import fakes


def test_node_metrics_list_is_read_as_millicores_and_bytes() -> None:
    """A NodeMetricsList item gives cpu in millicores and memory in bytes; one without memory is skipped."""
    raw = {
        "items": [
            {
                "metadata": {"name": "n1"},
                "timestamp": "2026-11-27T10:00:00Z",
                "window": "15.012s",
                "usage": {"cpu": "250316000n", "memory": "1Gi"},
            },
            {"metadata": {"name": "n2"}, "usage": {"cpu": "1"}},
        ]
    }
    assert metricsserver.parse_node_metrics(raw) == {
        "n1": usagesources.NodeReading(
            Resources({"cpu": 251, "memory": 1 << 30}), "2026-11-27T10:00:00Z/15.012s"
        )
    }


def test_pod_metrics_sum_the_containers_and_drop_incomplete_pods() -> None:
    """PodMetrics: Σ containers; a container missing a resource makes the pod's usage unknown."""
    raw = {
        "items": [
            {
                "metadata": {"namespace": "ns", "name": "web"},
                "containers": [
                    {"name": "a", "usage": {"cpu": "100m", "memory": "10Mi"}},
                    {"name": "b", "usage": {"cpu": "50m", "memory": "6Mi"}},
                ],
            },
            {
                "metadata": {"namespace": "ns", "name": "odd"},
                "containers": [{"name": "a", "usage": {"cpu": "5m"}}],
            },
        ]
    }
    assert metricsserver.parse_pod_metrics(raw) == {"ns/web": {"cpu": 150, "memory": 16 << 20}}
    assert metricsserver.parse_pod_metrics(raw, names={"odd", "gone"}) == {}


def vector(*samples: tuple[dict[str, str], str]) -> dict[str, Any]:
    result = [{"metric": m, "value": [1700000000.0, v]} for m, v in samples]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        pytest.param(
            {"status": "success", "data": {"resultType": "matrix", "result": []}},
            'expected query results to be of type "vector"',
            id="not-a-vector",
        ),
        pytest.param(vector(({"node": "n1"}, "0.5")), "missing 'instance' key", id="no-instance"),
        pytest.param(
            vector(({"instance": "n1"}, "1.5")), "outside of <0; 1> interval", id="above-one"
        ),
        pytest.param(
            {"status": "error", "errorType": "bad_data", "error": "parse error"},
            "parse error",
            id="query-error",
        ),
    ],
)
def test_a_query_answer_upstream_refuses_fails_the_reading(raw: dict[str, Any], error: str) -> None:
    """Upstream's rules: a vector, an `instance` label per sample, values in [0, 1]."""
    with pytest.raises(prometheus.QueryError, match=error):
        prometheus.parse_query_result(raw)


def test_a_sample_becomes_a_truncated_percentage() -> None:
    """int(value * 100), as upstream's int64(v*100): 0.5695... -> 56."""
    raw = vector(({"instance": "n1"}, "0.5695757575757561"), ({"instance": "n2"}, "0"))
    assert prometheus.parse_query_result(raw) == {"n1": 56, "n2": 0}


class _Api(http.server.BaseHTTPRequestHandler):
    """The Prometheus HTTP API's /api/v1/query, answering from `answers` by query."""

    # set per test by the fixture's subclass
    answers: ClassVar[dict[str, dict[str, Any]]]
    seen: ClassVar[list[tuple[str, dict[str, list[str]], str | None]]]

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        params = urllib.parse.parse_qs(url.query)
        self.seen.append((url.path, params, self.headers.get("Authorization")))
        answer = self.answers.get(params.get("query", [""])[0])
        code = 200 if answer is not None and answer.get("status") == "success" else 400
        body = json.dumps(answer or {"status": "error", "error": "unknown query"}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def prom() -> Iterator[tuple[str, type[_Api]]]:
    handler = type("Api", (_Api,), {"answers": {}, "seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_the_client_queries_at_now_with_the_bearer_token(prom: tuple[str, type[_Api]]) -> None:
    """GET /api/v1/query?query=...&time=now, Authorization: Bearer <token>."""
    url, api = prom
    api.answers["instance:node_cpu:rate:sum"] = vector(({"instance": "n1"}, "0.42"))
    client = prometheus.PrometheusClient(url + "/", token=lambda: "s3cret", clock=lambda: 1700.0)
    assert client.node_usage("instance:node_cpu:rate:sum") == {"n1": 42}
    path, params, auth = api.seen[0]
    assert (path, params["time"], auth) == ("/api/v1/query", ["1700.000"], "Bearer s3cret")


def test_a_bad_query_names_prometheus_own_error(prom: tuple[str, type[_Api]]) -> None:
    """Prometheus answers 400 with a JSON error; the error says what Prometheus said."""
    url, _ = prom
    client = prometheus.PrometheusClient(url, clock=lambda: 0.0)
    with pytest.raises(prometheus.QueryError, match="unknown query"):
        client.node_usage("nope")


def test_an_unreachable_prometheus_is_a_query_error() -> None:
    """Connection refused is reported, not raised as an OSError."""
    client = prometheus.PrometheusClient("http://127.0.0.1:9", clock=lambda: 0.0, timeout=2)
    with pytest.raises(prometheus.QueryError, match="unable to capture prometheus metrics"):
        client.node_usage("up")


def policy(**top: Any) -> config.DeschedulerConfiguration:
    raw = fakes.plugin_policy(
        "LowNodeUtilization",
        {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 70}},
        point="balance",
        **top,
    )
    return config.decode_configuration(raw, plugins=plugins.registry().catalog())


class _NoCalls:
    def get(self, path: str, **query: Any) -> Any:
        raise AssertionError(f"unexpected GET {path}")


@pytest.mark.parametrize(
    ("top", "server", "prom"),
    [
        pytest.param({}, False, False, id="none"),
        pytest.param({"metricsProviders": [{"source": "KubernetesMetrics"}]}, True, False, id="ms"),
        pytest.param({"metricsCollector": {"enabled": True}}, True, False, id="deprecated"),
        pytest.param(
            {
                "metricsProviders": [
                    {"source": "Prometheus", "prometheus": {"url": "http://p:9090"}}
                ]
            },
            False,
            True,
            id="prometheus",
        ),
    ],
)
def test_the_policy_says_which_readers_are_built(
    top: dict[str, Any], server: bool, prom: bool
) -> None:
    """metricsProviders (or the deprecated metricsCollector) choose the readers; none offline."""
    cfg = policy(**top)
    built = usagesources.from_policy(cfg, _NoCalls(), clock=lambda: 0.0)  # type: ignore[arg-type]
    assert (built.metrics_server is not None, built.prometheus is not None) == (server, prom)
    assert usagesources.from_policy(cfg, None, clock=lambda: 0.0) == usagesources.Sources()


# -- PodUsage: what is read, and what is kept between cycles -------------------------------


def _pod(namespace: str, name: str, node: str = "n1", uid: str | None = None) -> objects.Pod:
    return builders.make_pod(name, namespace=namespace, node=node, uid=uid)


def test_a_pod_replaced_under_the_same_name_is_read_again() -> None:
    """A kept usage belongs to one pod (uid) on one node: its successor is read anew."""
    metrics = fakes.MetricsServer({"n1": (100, 1)}, {"ns/web": (50, 1)})
    usage = usagesources.PodUsage(metrics, clock=fakes.FixedClock())
    first = _pod("ns", "web", uid="u1")
    usage.read_nodes()
    usage.want([first], lambda: {"ns": 1})
    assert usage.usage(first) == {"cpu": 50, "memory": 1}
    usage.read_nodes()
    successor = _pod("ns", "web", uid="u2")
    usage.want([successor], lambda: {"ns": 1})
    metrics.pods_usage["ns/web"] = (70, 1)
    assert usage.usage(successor) == {"cpu": 70, "memory": 1}
    assert metrics.take_requests() == [("nodes",), ("pod", "ns/web"), ("nodes",), ("pod", "ns/web")]


def test_few_wanted_pods_of_a_big_namespace_are_read_one_by_one() -> None:
    """2 wanted of 101: GETs, and only of the pods asked about; a pod metrics-server lacks is None."""
    metrics = fakes.MetricsServer({"n1": (100, 1)}, {"ns/a": (5, 1)})
    usage = usagesources.PodUsage(metrics, clock=fakes.FixedClock())
    a, b = _pod("ns", "a"), _pod("ns", "b")
    usage.read_nodes()
    usage.want([a, b], lambda: {"ns": 2 * podusage.LIST_FACTOR + 1})
    assert (usage.usage(a), usage.usage(b), usage.usage(a)) == (
        {"cpu": 5, "memory": 1},
        None,
        {"cpu": 5, "memory": 1},
    )
    assert metrics.take_requests() == [("nodes",), ("pod", "ns/a"), ("pod", "ns/b")]


def test_a_pod_nobody_announced_is_read_alone() -> None:
    """usage() of a pod outside `want` is one GET, never a namespace list."""
    metrics = fakes.MetricsServer({"n1": (100, 1)}, {"ns/a": (5, 1)})
    usage = usagesources.PodUsage(metrics, clock=fakes.FixedClock())
    usage.read_nodes()
    assert usage.usage(_pod("ns", "a")) == {"cpu": 5, "memory": 1}
    assert metrics.take_requests() == [("nodes",), ("pod", "ns/a")]


class _MetricsApi(http.server.BaseHTTPRequestHandler):
    """metrics.k8s.io over HTTP: PodMetrics of ns/web and ns/db, NodeMetrics of n1."""

    seen: ClassVar[list[str]]

    def do_GET(self) -> None:
        self.seen.append(self.path)
        web = {
            "metadata": {"namespace": "ns", "name": "web"},
            "containers": [{"name": "c", "usage": {"cpu": "100000001n", "memory": "10Mi"}}],
        }
        db = {**web, "metadata": {"namespace": "ns", "name": "db"}}
        answers: dict[str, Any] = {
            "/apis/metrics.k8s.io/v1beta1/nodes": {
                "items": [
                    {
                        "metadata": {"name": "n1"},
                        "timestamp": "T",
                        "window": "15s",
                        "usage": {"cpu": "2", "memory": "1Gi"},
                    }
                ]
            },
            "/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods": {"items": [web, db]},
            "/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods/web": web,
        }
        answer = answers.get(self.path)
        body = json.dumps(answer or {"kind": "Status", "reason": "NotFound", "code": 404})
        self.send_response(200 if answer is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: Any) -> None:
        pass


def test_the_reader_asks_metrics_k8s_io_for_nodes_one_pod_or_one_namespace() -> None:
    """The three requests over HTTP; a pod metrics-server has no metrics for (404) is None."""
    import kubernetes.client

    handler = type("Api", (_MetricsApi,), {"seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        config_ = kubernetes.client.Configuration()
        config_.host = f"http://127.0.0.1:{server.server_port}"
        reader = metricsserver.MetricsServer(
            rest.Rest(kubernetes.client.ApiClient(config_), qps=0, timeout=5)
        )
        nodes = reader.nodes()
        web = Resources({"cpu": 101, "memory": 10 << 20})
        assert reader.pods_in("ns", {"web"}) == {"ns/web": web}
        assert (reader.pod("ns", "web"), reader.pod("ns", "gone")) == (web, None)
    finally:
        server.shutdown()
        server.server_close()
    assert nodes == {
        "n1": usagesources.NodeReading(Resources({"cpu": 2000, "memory": 1 << 30}), "T/15s")
    }
    assert handler.seen == [
        "/apis/metrics.k8s.io/v1beta1/nodes",
        "/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods",
        "/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods/web",
        "/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods/gone",
    ]
