"""The scheduler extender's outside input: request bodies from kube-scheduler (or anyone
who can reach its port) and its args file. A body is answered 200 or 400, never 500;
args decode or raise ArgsError listing the problems."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from extender import args as argsmod
from extender import protocol, server
from extender.view import ClusterView
from tests.builders import T0, make_node_dict, make_nodemetric_dict, make_pod_dict
from tests.properties.strategies import json_values, mutated

REQUEST: dict[str, Any] = {
    "Pod": make_pod_dict("web-1", node=None, cpu="500m"),
    "Nodes": {"items": [make_node_dict("n1"), make_node_dict("n2")]},
    "NodeNames": ["n1", "n2"],
}
ARGS: dict[str, Any] = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "LoadAwareSchedulingArgs",
    "nodeMetricExpirationSeconds": 180,
    "enableScheduleWhenNodeMetricsExpired": True,
    "usageThresholds": {"cpu": 65, "memory": 80},
    "prodUsageThresholds": {"cpu": 55},
    "scoreAccordingProdUsage": False,
    "resourceWeights": {"cpu": 1, "memory": 1},
    "estimatedScalingFactors": {"cpu": 85, "memory": 70},
    "aggregated": {
        "usageThresholds": {"cpu": 60},
        "usageAggregationType": "p95",
        "scoreAggregationType": "avg",
        "scoreAggregatedDuration": "5m",
    },
}


def make_routes() -> dict[str, Any]:
    view = ClusterView(argsmod.decode_args({}), clock=lambda: T0.timestamp() + 30)
    for name, cpu in (("n1", "3"), ("n2", "500m")):
        view.on_node("ADDED", None, view.project_node(make_node_dict(name)))
        view.on_metric("ADDED", None, view.project_metric(make_nodemetric_dict(name, node_cpu=cpu)))
    registry = CollectorRegistry()
    framework = server.as_framework(view, registry)
    return dict(server.routes(framework, server.Telemetry(registry)))


ROUTES = make_routes()


def test_the_base_request_and_args_are_valid() -> None:
    """The documents the mutations start from are accepted (else they test nothing)."""
    body = json.dumps(REQUEST).encode()
    assert ROUTES["/filter"](body)[0] == ROUTES["/prioritize"](body)[0] == 200
    assert argsmod.decode_args(ARGS).aggregated is not None


def answer(body: bytes) -> None:
    for path, route in ROUTES.items():
        status, reply = route(body)
        assert status in (200, 400), (path, reply)
        json.loads(reply)


@given(mutated(REQUEST))
def test_a_mutated_request_is_answered_or_refused_as_bad(doc: Any) -> None:
    """ExtenderArgs with fields replaced, dropped or added: 200 or 400 with a JSON answer."""
    answer(json.dumps(doc).encode())


@given(st.one_of(st.binary(max_size=100), st.text(max_size=100).map(str.encode)))
def test_any_bytes_are_answered_or_refused_as_bad(body: bytes) -> None:
    """Not even JSON: 400 with a JSON error, never a 500."""
    answer(body)


@given(st.one_of(st.binary(max_size=60), json_values.map(lambda v: json.dumps(v).encode())))
def test_decode_args_raises_only_bad_request(body: bytes) -> None:
    """protocol.decode_args: ExtenderArgs or BadRequest."""
    try:
        protocol.decode_args(body)
    except protocol.BadRequest as err:
        assert str(err)


@given(st.one_of(mutated(ARGS), json_values))
def test_extender_args_decode_or_list_their_problems(raw: Any) -> None:
    """LoadAwareSchedulingArgs: decoded and defaulted, or ArgsError with every problem."""
    try:
        argsmod.decode_args(raw)
    except argsmod.ArgsError as err:
        assert err.problems and all(err.problems)


NAMES = st.lists(
    st.one_of(st.from_regex(r"[a-z0-9][a-z0-9.\-]{0,20}", fullmatch=True), st.text(max_size=8)),
    max_size=12,
)


@given(NAMES, st.data())
def test_fast_answers_are_the_documents_json_would_write(names: list[str], data: Any) -> None:
    """The preformatted answers (filter's every-node-passes, prioritize's cached entries)
    decode to exactly what json.dumps of the same answer decodes to, for any names,
    asked twice (the second time from the caches)."""
    args = protocol.ExtenderArgs({"metadata": {}}, names, None)
    scores = [(name, data.draw(st.integers(0, 10))) for name in names]
    for _ in range(2):
        assert json.loads(protocol.filter_result(args, names, {})) == {
            "FailedNodes": {},
            "Error": "",
            "NodeNames": names,
        }
        assert json.loads(protocol.priorities(scores)) == [
            {"Host": host, "Score": score} for host, score in scores
        ]
