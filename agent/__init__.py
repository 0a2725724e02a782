"""The nodeqos node agent: collectors, states informer, NodeMetric reporter, CLI.

- `agent.cli` - `nodeqos-agent`, the composition root (flags -> `AgentConfig`,
  one `CollectorRegistry`, signals);
- `agent.cluster` - the in-cluster agent: states informer, collection,
  NodeMetric reporter and QoS plugins, each with its own readiness;
- `agent.assembly` - what both modes share: the collection half (`assemble`),
  the server (`serve`), the rounds (`collect`), `print_status`;
- `agent.standalone` - the agent without a cluster (`run`);
- `agent.collectors` - node, pod/container, best-effort group, host
  application, PSI and system-usage collectors; `agent.collection` runs them
  once per round and `agent.schedule` paces the rounds;
- `agent.discovery` - which pods to read: the states informer's pods in a
  cluster, a scan of kubepods standalone;
- `agent.states` - the Node, Pods, NodeSLO and NodeMetric informers;
- `agent.nodemetric` - the pure NodeMetric status builder; `agent.reporter`
  publishes it;
- `agent.telemetry`, `agent.health`, `agent.server` - /metrics and /healthz;
- `agent.features`, `agent.config`, `agent.kinds` - gates, flag values, extra
  metric kinds.

`run(argv, qos_plugins=[...])` is `nodeqos-agent` with extra QoS plugins, for an
image that composes its own agent in Python; installed packages declaring entry
points in group `nodeqos.agent.qos_plugins` need no code at all (docs/plugins.md).
"""

from collections.abc import Iterable, Sequence


def run(argv: Sequence[str] | None = None, *, qos_plugins: Iterable[object] = ()) -> None:
    """`nodeqos-agent` with `argv` (default: sys.argv) and extra `qos_plugins`; exits.

    See `agent.cli.run`.
    """
    # Imported here: `import agent.config` must not pull in the CLI and every plugin.
    from agent import cli

    cli.run(argv, qos_plugins=qos_plugins)


__all__ = ["run"]
