"""Node utilisation from one Prometheus instant query.

Upstream (`NodeUsageFromPrometheusMetrics`, `pkg/framework/plugins/nodeutilization/
usageclients.go` at v0.36.0) runs the plugin's `prometheus.query` at "now"
against `/api/v1/query`, requires a `vector` result, maps each sample to the
node named by its `instance` label, refuses a value outside [0, 1], and keeps
`int(value * 100)` as the node's `MetricResource` percentage. The whole
reading fails on any such problem (a query that does not answer per node is a
configuration mistake, not a node's).
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

# Upstream's resource name for a third-party metric (nodeutilization `types.go`).
METRIC_RESOURCE = "MetricResource"


class QueryError(Exception):
    """The query could not be run or its answer is not one value in [0, 1] per node."""


def parse_query_result(raw: Mapping[str, Any]) -> dict[str, int]:
    """A `/api/v1/query` answer -> node -> percentage (0..100), upstream's rules."""
    if raw.get("status") != "success":
        raise QueryError(f"prometheus answered {raw.get('status')!r}: {raw.get('error', '')}")
    data = raw.get("data") or {}
    kind = data.get("resultType")
    if kind != "vector":
        raise QueryError(f'expected query results to be of type "vector", got {kind!r} instead')
    out: dict[str, int] = {}
    for sample in data.get("result") or ():
        node = (sample.get("metric") or {}).get("instance")
        if node is None:
            raise QueryError("the collected metrics sample is missing 'instance' key")
        try:
            value = float(sample["value"][1])
        except (KeyError, IndexError, TypeError, ValueError) as err:
            raise QueryError(f"sample for {node!r} has no value: {err}") from None
        if math.isnan(value) or value < 0 or value > 1:
            raise QueryError(
                f"the collected metrics sample for {node!r} has value {value}"
                " outside of <0; 1> interval"
            )
        out[node] = int(value * 100)  # truncation, as Go's int64(v*100)
    return out


Opener = Callable[[urllib.request.Request, float], Any]


def _open(request: urllib.request.Request, timeout: float) -> Any:
    return urllib.request.urlopen(request, timeout=timeout)


class PrometheusClient:
    """Instant queries against one Prometheus HTTP API (`metricsProviders[].prometheus`)."""

    def __init__(
        self,
        url: str,
        *,
        token: Callable[[], str | None] = lambda: None,
        clock: Callable[[], float],
        timeout: float = 30.0,
        opener: Opener = _open,
    ) -> None:
        self.url = url.rstrip("/")
        self._token = token
        self._clock = clock
        self._timeout = timeout
        self._open = opener

    def node_usage(self, query: str) -> dict[str, int]:
        """node -> percentage for `query` now; raises `QueryError`."""
        params = urllib.parse.urlencode({"query": query, "time": f"{self._clock():.3f}"})
        request = urllib.request.Request(f"{self.url}/api/v1/query?{params}")
        token = self._token()
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with self._open(request, self._timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as err:
            body = err.read()  # Prometheus explains a bad query in a JSON body (400/422)
            if not body:
                raise QueryError(f"unable to capture prometheus metrics: {err}") from None
        except (OSError, ValueError) as err:
            raise QueryError(f"unable to capture prometheus metrics: {err}") from None
        try:
            raw = json.loads(body)
        except ValueError as err:
            raise QueryError(f"prometheus answer is not JSON: {err}") from None
        return parse_query_result(raw)
