"""The daemon's HTTP endpoint: `/metrics`, `/healthz` (JSON) and `/livez`.

The server is `kube.endpoint`, shared with the agent; this module parses
listen addresses and feeds it the descheduler's checks (see `health`).
"""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry

from descheduler.app import health
from kube import endpoint

DEFAULT_ADDRESS = "0.0.0.0:10258"  # kubernetes-sigs/descheduler's port

_ADDRESS = re.compile(r"(\[[^\]]*\]|[^:\[\]]*):(\d+)")


def parse_address(text: str) -> tuple[str, int]:
    """`host:port`, `:port` (every interface) or `[v6]:port`; raises ValueError."""
    match = _ADDRESS.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"must be HOST:PORT, :PORT or [IPv6]:PORT (got {text!r})")
    host, port = match.group(1).strip("[]"), int(match.group(2))
    if port > 65535:
        raise ValueError(f"port {port} is out of range")
    return host or "0.0.0.0", port


class HttpServer(endpoint.Endpoint):
    """The descheduler's endpoint; `close()` stops it. Port 0 binds a free port."""

    __slots__ = ()

    def __init__(
        self, address: tuple[str, int], registry: CollectorRegistry, checks: health.Health
    ) -> None:
        super().__init__(address, registry, checks.to_json, name="descheduler-http")
