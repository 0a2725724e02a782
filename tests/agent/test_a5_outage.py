"""A5: kube-apiserver is gone for 60 s; the agent keeps collecting and reports soon after.

The test owns its control plane (`private_control_plane`) and stops only the
API server (etcd keeps the data, the port stays). The NodeMetric asks for the
shortest report interval, 30 s: the first report after the server is back must
come well within it, while the agent stayed alive, kept collecting and kept
answering /healthz throughout.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from kube import rest, slo
from testbed import controlplane, localcluster
from tests.agent.clusterkit import (
    AgentProcess,
    LiveNode,
    create_nodemetric,
    wait_for_report,
)

pytestmark = [pytest.mark.controlplane, pytest.mark.slow]

OUTAGE_SECONDS = 60.0
REPORT_INTERVAL = 30


def test_agent_survives_an_api_outage_and_reports_within_one_interval(
    private_control_plane: controlplane.ControlPlane, tmp_path: Path
) -> None:
    """Alive and collecting during 60 s without API server; a fresh report < 30 s after."""
    plane = private_control_plane
    kube = rest.Rest(rest.api_client(plane.kubeconfig), qps=0)
    node_name = f"a5-{uuid.uuid4().hex[:8]}"
    localcluster.register_node(kube, node_name)
    create_nodemetric(kube, node_name, {"reportIntervalSeconds": REPORT_INTERVAL})
    live = LiveNode(tmp_path, node_cpu=1.0)
    with AgentProcess(tmp_path, plane.kubeconfig, live, node_name) as agent:
        before = wait_for_report(kube, node_name)["status"]["updateTime"]
        rounds_before = agent.metric("nodeqos_agent_collect_rounds_total") or 0.0

        plane.stop_apiserver()
        down_until = time.monotonic() + OUTAGE_SECONDS
        while time.monotonic() < down_until:
            assert agent.alive, agent.log()[-3000:]
            code, _body = agent.get("/healthz")
            assert code == 200  # collector and reporter stay ready: restarting cannot help
            time.sleep(5)
        rounds_during = agent.metric("nodeqos_agent_collect_rounds_total") or 0.0
        unavailable = agent.metric(
            "nodeqos_agent_nodemetric_reports_total", {"result": "unavailable"}
        )
        plane.start_apiserver()
        back = time.monotonic()

        after = wait_for_report(kube, node_name, after=before, timeout=REPORT_INTERVAL + 5)
        delay = time.monotonic() - back
        assert agent.alive
        assert agent.terminate() == 0, agent.log()[-3000:]

    # 200 ms rounds: ~300 in 60 s; allow for a loaded machine
    assert rounds_during - rounds_before >= 200
    assert unavailable is not None and unavailable >= 5  # retried, with backoff, all along
    assert delay < REPORT_INTERVAL, f"first report {delay:.1f}s after the server came back"
    status = after["status"]
    assert status["updateTime"] > before
    # the 300 s average spans the outage: collection never stopped
    usage = slo.resource_map_from_api(status["nodeMetric"]["nodeUsage"])
    assert usage.cpu == pytest.approx(1000, rel=0.05)
