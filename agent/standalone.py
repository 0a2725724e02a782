"""The standalone agent: collection on any Linux machine, no cluster needed.

`run` is what `nodeqos-agent --standalone` does: the collection half built by
`agent.assembly.assemble` with its default `PodSource` (a scan of kubepods),
`/metrics` + `/healthz`, rounds until stopped (or for `--run-for`), and with
`--print-nodemetric` the NodeMetric status it would publish, as YAML. No QoS
plugin runs and nothing is published.
"""

from __future__ import annotations

import threading
from typing import TextIO

from prometheus_client import CollectorRegistry

from agent import assembly
from agent.config import AgentConfig
from agent.schedule import Clock, SystemClock
from agent.server import MetricsServer


def run(
    config: AgentConfig,
    registry: CollectorRegistry,
    *,
    stop: threading.Event,
    out: TextIO,
    clock: Clock | None = None,
) -> None:
    """Run the standalone agent until `stop` is set or `config.run_for` has passed."""
    clock = clock or SystemClock()
    agent = assembly.assemble(config, registry, clock)
    server: MetricsServer | None = None
    try:
        server = assembly.serve(config, registry, agent.readiness)
        assembly.collect(agent, config, clock, stop)
        if config.print_nodemetric:
            assembly.print_status(agent, clock.time(), out)
    finally:
        if server is not None:
            server.close()
        agent.close()
