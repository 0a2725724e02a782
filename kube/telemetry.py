"""The metrics every nodeqos daemon carries: its build and, where it elects a leader, leadership.

The agent, the descheduler and the manager each call `build_info(registry,
"<daemon>")` on the registry their `main` builds (nothing registers at import
time); the two cluster daemons that elect a leader add `leader(registry,
"<daemon>")`. `version()` is the one place the running version is read.
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
    registry: CollectorRegistry, daemon: str, *, build_version: str | None = None
) -> Gauge:
    """`nodeqos_<daemon>_build_info{version}`, set to 1 for this build."""
    gauge = Gauge(
        f"nodeqos_{daemon}_build_info",
        "Always 1; the version label says which nodeqos build runs.",
        ["version"],
        registry=registry,
    )
    gauge.labels(build_version or version()).set(1)
    return gauge


def leader(registry: CollectorRegistry, daemon: str) -> Gauge:
    """`nodeqos_<daemon>_leader`: 1 while this replica leads (or leader election is off)."""
    return Gauge(
        f"nodeqos_{daemon}_leader",
        "1 while this replica holds the leader lease (or leader election is off).",
        registry=registry,
    )
