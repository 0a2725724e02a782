"""deploy/daemonset.yaml runs the agent in cluster mode with flags the CLI accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agent import cli

ROOT = Path(__file__).resolve().parents[2]


def agent_container() -> dict[str, Any]:
    docs = yaml.safe_load_all((ROOT / "deploy" / "daemonset.yaml").read_text())
    (daemonset,) = [d for d in docs if d and d.get("kind") == "DaemonSet"]
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    return dict(container)


def test_daemonset_args_parse_as_in_cluster_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """The DaemonSet's args are valid flags; no --standalone; the node name comes from NODE_NAME."""
    container = agent_container()
    assert container["command"] == ["nodeqos-agent"]
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    monkeypatch.setenv("NODE_NAME", "node-from-downward-api")
    ctx = cli.build_command().make_context("nodeqos-agent", list(container["args"]))
    params = ctx.params
    assert params["standalone_mode"] is False
    assert params["kubeconfig"] is None  # the pod's service account
    assert params["node_name"] == "node-from-downward-api"
    assert str(params["cgroup_root"]) == "/host/sys/fs/cgroup"
    assert str(params["proc_root"]) == "/host/proc"
    assert str(params["metric_cache_path"]).startswith("/var/lib/nodeqos/")
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/host/sys/fs/cgroup", "/host/proc", "/var/lib/nodeqos"} <= mounts
