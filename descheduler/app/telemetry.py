"""The daemon's own metrics, beside the framework's (`descheduler.framework.Metrics`).

Created on the registry `main` builds; nothing registers at import time.
"""

from __future__ import annotations

from importlib import metadata

from prometheus_client import CollectorRegistry, Gauge


def version() -> str:
    """The installed nodeqos version ("unknown" when running from a bare checkout)."""
    try:
        return metadata.version("nodeqos")
    except metadata.PackageNotFoundError:
        return "unknown"


class AppMetrics:
    """`nodeqos_descheduler_build_info{version}` and `nodeqos_descheduler_leader`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.build_info = Gauge(
            "nodeqos_descheduler_build_info",
            "Always 1; the version label says which nodeqos build runs.",
            ["version"],
            registry=registry,
        )
        self.build_info.labels(version()).set(1)
        self.leader = Gauge(
            "nodeqos_descheduler_leader",
            "1 while this replica holds the leader lease (or leader election is off).",
            registry=registry,
        )
