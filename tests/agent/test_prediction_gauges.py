"""The peak predictor's gauges on /metrics: the reporter's result, at scrape time."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from agent import peak, telemetry
from kube import quantity

GIB = 1 << 30


def test_gauges_follow_the_prediction_and_have_no_sample_without_one() -> None:
    """Reclaimable and peak in cores and bytes, warm as 0/1; nothing before a result exists."""
    current: list[peak.Reclaimable | None] = [None]
    registry = CollectorRegistry()
    registry.register(telemetry.PredictionCollector(lambda: current[0]))
    assert registry.get_sample_value("nodeqos_agent_prod_reclaimable_cpu_cores") is None
    current[0] = peak.Reclaimable(
        reclaimable=quantity.Resources({"cpu": 1450, "memory": GIB}),
        peak=quantity.Resources({"cpu": 550, "memory": 3 * GIB}),
    )
    got = {
        name: registry.get_sample_value(name)
        for name in (
            "nodeqos_agent_prod_reclaimable_cpu_cores",
            "nodeqos_agent_prod_reclaimable_memory_bytes",
            "nodeqos_agent_prod_peak_cpu_cores",
            "nodeqos_agent_prod_peak_memory_bytes",
            "nodeqos_agent_prediction_warm",
        )
    }
    assert got == {
        "nodeqos_agent_prod_reclaimable_cpu_cores": 1.45,
        "nodeqos_agent_prod_reclaimable_memory_bytes": float(GIB),
        "nodeqos_agent_prod_peak_cpu_cores": 0.55,
        "nodeqos_agent_prod_peak_memory_bytes": float(3 * GIB),
        "nodeqos_agent_prediction_warm": 1.0,
    }
