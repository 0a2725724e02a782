"""The daemon's own metrics, beside the framework's (`descheduler.framework.Metrics`).

Created on the registry `main` builds; nothing registers at import time. The
build and leader gauges are the ones every nodeqos daemon has (`kube.telemetry`).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from kube import telemetry


class AppMetrics:
    """`nodeqos_descheduler_build_info{version}` and `nodeqos_descheduler_leader`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.build_info = telemetry.build_info(registry, "nodeqos_descheduler_build_info")
        self.leader = telemetry.leader(registry, "nodeqos_descheduler_leader")
