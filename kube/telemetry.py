"""The metrics every nodeqos daemon carries: its build and, where it elects a leader, leadership.

The agent, the descheduler and the manager each call `build_info(registry,
"nodeqos_<daemon>_build_info")` on the registry their `main` builds (nothing
registers at import time); the two cluster daemons that elect a leader add
`leader(registry, "nodeqos_<daemon>_leader")`. The callers spell the whole name,
so that a search for a metric finds where it is declared. `version()` is the one
place the running version is read.
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


def build_info(
    registry: CollectorRegistry, name: str, *, build_version: str | None = None
) -> Gauge:
    """The gauge `name{version}` (`nodeqos_<daemon>_build_info`), set to 1 for this build."""
    gauge = Gauge(
        name,
        "Always 1; the version label says which nodeqos build runs.",
        ["version"],
        registry=registry,
    )
    gauge.labels(build_version or version()).set(1)
    return gauge


def leader(registry: CollectorRegistry, name: str) -> Gauge:
    """The gauge `name` (`nodeqos_<daemon>_leader`): 1 while this replica leads (or leader
    election is off)."""
    return Gauge(
        name,
        "1 while this replica holds the leader lease (or leader election is off).",
        registry=registry,
    )
