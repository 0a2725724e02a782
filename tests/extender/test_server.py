"""The extender's HTTP surface: the kube-scheduler wire format, errors as answers, metrics."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from extender import args as argsmod
from extender import server
from extender.view import ClusterView
from tests.builders import T0, make_node_dict, make_nodemetric_dict, make_pod_dict


@pytest.fixture
def served() -> Iterator[tuple[http.client.HTTPConnection, CollectorRegistry]]:
    view = ClusterView(argsmod.decode_args({}), clock=lambda: T0.timestamp() + 30)
    for name, cpu in (("n1", "3"), ("n2", "500m")):
        view.on_node("ADDED", None, view.project_node(make_node_dict(name)))
        view.on_metric("ADDED", None, view.project_metric(make_nodemetric_dict(name, node_cpu=cpu)))
    registry = CollectorRegistry()
    http_server = server.HttpServer(("127.0.0.1", 0), view, registry, lambda: {"ready": True})
    connection = http.client.HTTPConnection(*http_server.address, timeout=5)
    yield connection, registry
    connection.close()
    http_server.close()


def post(connection: http.client.HTTPConnection, path: str, body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    connection.request("POST", path, data, {"Content-Type": "application/json"})
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def extender_args(**extra: Any) -> dict[str, Any]:
    pod = make_pod_dict("web-1", node=None, cpu="500m")
    return {"Pod": pod, "Nodes": None, "NodeNames": ["n1", "n2"], **extra}


def test_filter_answers_an_extender_filter_result(served: Any) -> None:
    """NodeNames in, NodeNames + FailedNodes out, over one keep-alive connection."""
    connection, _ = served
    status, body = post(connection, "/filter", extender_args())
    assert status == 200
    assert body == {
        "NodeNames": ["n2"],
        "FailedNodes": {"n1": "node n1: cpu usage 86 percent > threshold 65 percent"},
        "Error": "",
    }
    status, again = post(connection, "/filter", extender_args())  # same socket
    assert status == 200 and again == body


def test_prioritize_answers_a_host_priority_list(served: Any) -> None:
    """Scores 0..10 per host, the cooler node higher."""
    connection, _ = served
    status, body = post(connection, "/prioritize", extender_args())
    assert status == 200
    scores = {p["Host"]: p["Score"] for p in body}
    assert set(scores) == {"n1", "n2"} and scores["n2"] > scores["n1"]
    assert all(0 <= s <= 10 for s in scores.values())


def test_a_new_version_of_the_same_pod_is_judged_afresh(served: Any) -> None:
    """Filter reuses the last projection only for the same uid and resourceVersion."""
    connection, _ = served
    small = extender_args()
    small["Pod"]["metadata"]["resourceVersion"] = "7"
    _, body = post(connection, "/filter", small)
    assert body["NodeNames"] == ["n2"]
    big = make_pod_dict("web-1", node=None, cpu="3")  # same uid, resized
    big["metadata"]["resourceVersion"] = "8"
    _, body = post(connection, "/filter", {**small, "Pod": big})
    assert body["NodeNames"] == [] and set(body["FailedNodes"]) == {"n1", "n2"}


def test_whole_nodes_are_answered_as_whole_nodes(served: Any) -> None:
    """Without nodeCacheCapable the scheduler sends a NodeList; the answer filters it."""
    connection, _ = served
    nodes = {"items": [make_node_dict("n1"), make_node_dict("n2")]}
    status, body = post(connection, "/filter", {"Pod": extender_args()["Pod"], "Nodes": nodes})
    assert status == 200
    assert [n["metadata"]["name"] for n in body["Nodes"]["items"]] == ["n2"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(b"{not json", "the body is not JSON", id="not-json"),
        pytest.param({"NodeNames": ["n1"]}, "Pod: missing", id="no-pod"),
        pytest.param(
            {"Pod": {"metadata": {}}, "NodeNames": "n1"}, "NodeNames: must be", id="names"
        ),
        pytest.param(
            {
                "Pod": {
                    "metadata": {"name": "x"},
                    "spec": {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]},
                },
                "NodeNames": [],
            },
            "bad ExtenderArgs",
            id="bad-quantity",
        ),
    ],
)
def test_a_malformed_request_is_answered_400_with_the_reason(
    served: Any, body: Any, message: str
) -> None:
    """The server says what is wrong and keeps serving."""
    connection, registry = served
    status, reply = post(connection, "/filter", body)
    assert status == 400 and message in reply["Error"]
    assert post(connection, "/filter", extender_args())[0] == 200
    assert (
        registry.get_sample_value(
            "nodeqos_extender_requests_total", {"verb": "filter", "outcome": "bad_request"}
        )
        == 1
    )


def test_metrics_and_health_share_the_port(served: Any) -> None:
    """/metrics carries the verb latency histogram; /healthz the readiness."""
    connection, _ = served
    post(connection, "/prioritize", extender_args())
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    assert 'nodeqos_extender_request_duration_seconds_count{verb="prioritize"} 1.0' in text
    connection.request("GET", "/healthz")
    assert json.loads(connection.getresponse().read()) == {"ready": True}


@pytest.mark.parametrize(
    "names",
    [
        pytest.param(["n1", "node-2.example"], id="dns-names"),
        pytest.param(['we"ird', "Ünï"], id="names-that-need-escaping"),
    ],
)
def test_host_priority_lists_are_valid_json_for_any_name(names: list[str]) -> None:
    """The fast encoding and the json.dumps fallback give the same document."""
    from extender import protocol

    scores = [(name, i) for i, name in enumerate(names)]
    assert json.loads(protocol.priorities(scores)) == [{"Host": n, "Score": s} for n, s in scores]


def test_prioritize_reuses_a_decoded_body_only_when_it_is_the_same(served: Any) -> None:
    """kube-scheduler posts prioritize the body filter got when every node passed, and
    it is decoded once; a different body in between must not be answered from it."""
    connection, _ = served
    small = extender_args()
    big = extender_args()
    big["Pod"] = make_pod_dict("web-2", node=None, cpu="3")
    post(connection, "/filter", small)
    small_scores = post(connection, "/prioritize", small)
    post(connection, "/filter", small)
    big_scores = post(connection, "/prioritize", big)
    assert small_scores != big_scores  # else this test could not tell them apart
    post(connection, "/filter", big)
    assert post(connection, "/prioritize", small) == small_scores
