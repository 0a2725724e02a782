"""The agent's HTTP endpoint: `/metrics`, `/healthz` (readiness) and `/livez`.

The server itself is `kube.endpoint`, shared with the descheduler; this module
only feeds it the agent's readiness (`agent.health.Readiness`). `/livez`
answers whenever the process does: an unreachable API server makes the agent
unready, but must not get it restarted, since collection goes on without it.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from agent import health
from kube import endpoint


class MetricsServer(endpoint.Endpoint):
    """The agent's endpoint on host:port; `close()` stops it."""

    __slots__ = ()

    def __init__(
        self, host: str, port: int, registry: CollectorRegistry, readiness: health.Readiness
    ) -> None:
        super().__init__((host, port), registry, readiness.to_json, name="agent-http")
