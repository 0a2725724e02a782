"""The extender's HTTP server: `/filter`, `/prioritize`, `/metrics`, `/healthz`, `/livez`.

Built on `kube.endpoint` (shared with the agent and the descheduler). A verb
never raises out of here: a malformed request is answered 400 with the reason;
an unexpected failure 500 with the reason logged. kube-scheduler treats either
as an extender error, and the shipped configuration marks the extender
`ignorable`, so scheduling carries on without load awareness rather than stops.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from extender import protocol
from extender.loads import PodLoad
from extender.view import ClusterView
from kube import endpoint

log = logging.getLogger(__name__)

DEFAULT_ADDRESS = ("0.0.0.0", 10262)
_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0)


class Telemetry:
    """The extender's Prometheus series."""

    def __init__(self, registry: CollectorRegistry, view: ClusterView) -> None:
        self.requests = Counter(
            "nodeqos_extender_requests",
            "Extender verb calls by outcome (ok, bad_request, error).",
            ["verb", "outcome"],
            registry=registry,
        )
        self.latency = Histogram(
            "nodeqos_extender_request_duration_seconds",
            "Time to answer one extender verb call.",
            ["verb"],
            buckets=_BUCKETS,
            registry=registry,
        )
        self.refused = Counter(
            "nodeqos_extender_filtered_nodes",
            "Nodes the filter verb refused.",
            registry=registry,
        )
        expected = Gauge(
            "nodeqos_extender_expected_pods",
            "Pods counted on the node the extender pointed them to, before their binding is seen.",
            registry=registry,
        )
        expected.set_function(lambda: view.expectations)


def routes(view: ClusterView, telemetry: Telemetry) -> Mapping[str, endpoint.Route]:
    """The POST handlers for kube-scheduler's `urlPrefix` + `filterVerb` / `prioritizeVerb`."""

    def timed(verb: str, handle: Callable[[bytes], tuple[int, bytes]]) -> endpoint.Route:
        def route(body: bytes) -> tuple[int, bytes]:
            start = time.perf_counter()
            try:
                status, reply = handle(body)
                outcome = "ok" if status == 200 else "bad_request"
            except Exception as err:  # the only broad catch: one bad call must not kill the server
                log.exception("%s failed", verb)
                status, reply, outcome = (
                    500,
                    protocol.filter_error(f"{verb} failed: {err}"),
                    "error",
                )
            telemetry.requests.labels(verb, outcome).inc()
            telemetry.latency.labels(verb).observe(time.perf_counter() - start)
            return status, reply

        return route

    # kube-scheduler asks filter, then prioritize, about the same pod version:
    # project it once (a projection is most of a small call's cost).
    last: tuple[tuple[str, str], PodLoad] | None = None

    def project(raw: Mapping[str, Any]) -> PodLoad:
        nonlocal last
        meta = raw["metadata"]
        key = (str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""))
        seen = last  # one read: handler threads replace `last` whole, never mutate it
        if seen is not None and seen[0] == key:
            return seen[1]
        pod = view.project_pod(raw)
        if key[0] and key[1]:
            last = (key, pod)
        return pod

    # When filter lets every node through, prioritize's body is filter's, byte for
    # byte: decode it once.
    decoded: tuple[bytes, protocol.ExtenderArgs, PodLoad] | None = None

    def decode(body: bytes) -> tuple[protocol.ExtenderArgs, PodLoad]:
        """The request and its pod; BadRequest for anything that is not an ExtenderArgs.

        Anyone who reaches the port can post, so the pod may be any JSON: a field of
        the wrong type is a bad request, not a server error.
        """
        nonlocal decoded
        seen = decoded  # one read, as for `last`
        if seen is not None and seen[0] == body:
            return seen[1], seen[2]
        args = protocol.decode_args(body)
        try:
            pod = project(args.pod)
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as err:
            raise protocol.BadRequest(f"Pod: not a valid v1.Pod ({err})") from None
        decoded = (body, args, pod)
        return args, pod

    def filter_(body: bytes) -> tuple[int, bytes]:
        try:
            args, pod = decode(body)
        except protocol.BadRequest as err:
            return 400, protocol.filter_error(f"bad ExtenderArgs: {err}")
        verdict = view.filter(pod, args.node_names)
        if verdict.failed:
            telemetry.refused.inc(len(verdict.failed))
            log.debug("filter %s: refused %s", pod.key, verdict.failed)
        return 200, protocol.filter_result(args, verdict.passed, verdict.failed)

    def prioritize(body: bytes) -> tuple[int, bytes]:
        try:
            args, pod = decode(body)
        except protocol.BadRequest as err:
            return 400, protocol.filter_error(f"bad ExtenderArgs: {err}")
        return 200, protocol.priorities(view.prioritize(pod, args.node_names))

    return {"/filter": timed("filter", filter_), "/prioritize": timed("prioritize", prioritize)}


class HttpServer(endpoint.Endpoint):
    """The extender's endpoint; `close()` stops it. Port 0 binds a free port."""

    __slots__ = ()

    def __init__(
        self,
        address: tuple[str, int],
        view: ClusterView,
        registry: CollectorRegistry,
        readiness: endpoint.Readiness,
    ) -> None:
        telemetry = Telemetry(registry, view)
        super().__init__(
            address,
            registry,
            readiness,
            name="extender-http",
            routes=routes(view, telemetry),
        )
