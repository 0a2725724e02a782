"""The nodeqos node agent: collectors, states informer, NodeMetric reporter, CLI.

The collection half lives here so far:

- `agent.cli` - `nodeqos-agent`, the composition root (flags -> `AgentConfig`,
  one `CollectorRegistry`, signals);
- `agent.standalone` - assembles and runs the agent without a cluster;
- `agent.collectors` - node, pod/container, best-effort group, host
  application, PSI and system-usage collectors; `agent.collection` runs them
  once per round and `agent.schedule` paces the rounds;
- `agent.discovery` - which pods to read (standalone: scan kubepods);
- `agent.nodemetric` - the pure NodeMetric status builder;
- `agent.telemetry`, `agent.health`, `agent.server` - /metrics and /healthz;
- `agent.features`, `agent.config`, `agent.kinds` - gates, flag values, extra
  metric kinds.
"""
