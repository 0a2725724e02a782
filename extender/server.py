"""The extender's HTTP server: `/filter`, `/prioritize`, `/metrics`, `/healthz`, `/livez`.

The verbs are answered by the profile's plugins (`extender.framework`); a bare
`ClusterView` is served as LoadAwareScheduling alone.

Built on `kube.endpoint` (shared with every daemon: its limits and timeouts). A verb
never raises out of here: a malformed request is answered 400 with the reason;
an unexpected failure 500 with the reason logged. kube-scheduler treats either
as an extender error, and the shipped configuration marks the extender
`ignorable`, so scheduling carries on without load awareness rather than stops.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram

from extender import protocol
from extender.framework import Framework, InvalidPod, Slot
from extender.plugins import loadaware
from extender.view import ClusterView
from kube import endpoint

log = logging.getLogger(__name__)

DEFAULT_ADDRESS = ("0.0.0.0", 10262)
_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0)


class Telemetry:
    """The extender's own Prometheus series (plugins register theirs through their Handle)."""

    def __init__(self, registry: CollectorRegistry) -> None:
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


def as_framework(target: Framework | ClusterView, registry: CollectorRegistry) -> Framework:
    """`target` itself, or a view served as LoadAwareScheduling alone (tests, the benchmark)."""
    if isinstance(target, Framework):
        return target
    plugin = loadaware.wrap(target, registry)
    slot = Slot(loadaware.NAME, plugin)
    return Framework([slot], [slot], registry)


def routes(framework: Framework, telemetry: Telemetry) -> Mapping[str, endpoint.Route]:
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

    # When filter lets every node through, prioritize's body is filter's, byte for
    # byte: decode it once. (The framework keeps each plugin's per-pod state across
    # the two calls the same way, by pod uid and resourceVersion.)
    decoded: tuple[bytes, protocol.ExtenderArgs] | None = None

    def decode(body: bytes) -> protocol.ExtenderArgs:
        nonlocal decoded
        seen = decoded  # one read: handler threads replace `decoded` whole, never mutate it
        if seen is not None and seen[0] == body:
            return seen[1]
        args = protocol.decode_args(body)
        decoded = (body, args)
        return args

    def filter_(body: bytes) -> tuple[int, bytes]:
        try:
            args = decode(body)
            passed, failed = framework.filter(args.pod, args.node_names)
        except (protocol.BadRequest, InvalidPod) as err:
            return 400, protocol.filter_error(f"bad ExtenderArgs: {err}")
        if failed:
            telemetry.refused.inc(len(failed))
            log.debug("filter %s: refused %s", args.pod["metadata"].get("name"), failed)
        return 200, protocol.filter_result(args, passed, failed)

    def prioritize(body: bytes) -> tuple[int, bytes]:
        try:
            args = decode(body)
            scores = framework.prioritize(args.pod, args.node_names)
        except (protocol.BadRequest, InvalidPod) as err:
            return 400, protocol.filter_error(f"bad ExtenderArgs: {err}")
        return 200, protocol.priorities(scores)

    return {"/filter": timed("filter", filter_), "/prioritize": timed("prioritize", prioritize)}


class HttpServer(endpoint.Endpoint):
    """The extender's endpoint; `close()` stops it. Port 0 binds a free port."""

    __slots__ = ()

    def __init__(
        self,
        address: tuple[str, int],
        target: Framework | ClusterView,
        registry: CollectorRegistry,
        readiness: endpoint.Readiness,
        *,
        limits: endpoint.Limits = endpoint.LIMITS,
    ) -> None:
        telemetry = Telemetry(registry)
        super().__init__(
            address,
            registry,
            readiness,
            name="extender-http",
            routes=routes(as_framework(target, registry), telemetry),
            limits=limits,
        )
