"""No global barrier: an agent whose API server is unreachable from the start still collects."""

from __future__ import annotations

import json
from pathlib import Path

from testbed import controlplane
from tests.agent.clusterkit import AgentProcess, LiveNode
from tests.waiting import eventually


def test_collection_starts_without_the_api_and_healthz_says_who_waits(tmp_path: Path) -> None:
    """Rounds run and the collector is ready; states/*, reporter and qosmanager say why not."""
    kubeconfig = tmp_path / "kubeconfig"
    port = controlplane.free_port()  # nothing listens there
    kubeconfig.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: gone
  cluster: {{server: "https://127.0.0.1:{port}", insecure-skip-tls-verify: true}}
users:
- name: agent
  user: {{token: "t"}}
contexts:
- name: gone
  context: {{cluster: gone, user: agent}}
current-context: gone
"""
    )
    live = LiveNode(tmp_path, node_cpu=0.5)
    with AgentProcess(tmp_path, kubeconfig, live, "offline") as agent:
        eventually(
            lambda: (agent.metric("nodeqos_agent_collect_rounds_total") or 0) >= 10,
            "ten collection rounds",
        )
        code, body = agent.get("/healthz")
        cpu = agent.metric("nodeqos_agent_node_cpu_usage_cores")
        assert agent.terminate() == 0, agent.log()[-3000:]
    components = json.loads(body)["components"]
    assert code == 503
    assert components["collector"]["ready"] is True
    assert components["metriccache"]["ready"] is True
    for name in ("states/node", "states/pods", "states/nodeslo", "states/nodemetric"):
        assert components[name]["ready"] is False
        assert "Connection refused" in components[name]["detail"] or (
            components[name]["detail"] == "not listed yet"
        )
    assert components["reporter"] == {"ready": False, "detail": "no report yet"}
    assert components["qosmanager"]["ready"] is False
    assert "waiting for the states informer's first sync" in components["qosmanager"]["detail"]
    assert cpu is not None and abs(cpu - 0.5) < 0.2  # node CPU is measured all the same
