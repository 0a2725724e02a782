"""testbed.placementloop's overlay of deploy/: every patched config still loads, and deploy/
itself is left as shipped (the e2e run of the loop is tests/e2e/test_placement.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from testbed import placementloop

IMAGE = "nodeqos.local/nodeqos:dev"


def _docs(tmp_path: Path) -> dict[str, dict[str, Any]]:
    return {
        f"{doc['kind']}/{doc['metadata']['name']}": doc
        for doc in placementloop.manifests(IMAGE, tmp_path / "state")
    }


def test_every_workload_runs_the_local_image(tmp_path: Path) -> None:
    """No NODEQOS_IMAGE placeholder is left in a DaemonSet or Deployment."""
    for doc in _docs(tmp_path).values():
        if doc["kind"] in ("DaemonSet", "Deployment"):
            images = {c["image"] for c in doc["spec"]["template"]["spec"]["containers"]}
            assert images == {IMAGE}, doc["metadata"]["name"]


def test_agents_measure_their_kubepods_with_their_own_cache(tmp_path: Path) -> None:
    """The agent flags the overlay adds are ones nodeqos-agent accepts; each node its own cache."""
    from agent import cli

    agent = _docs(tmp_path)["DaemonSet/nodeqos-agent"]["spec"]["template"]["spec"]
    (container,) = agent["containers"]
    assert "--node-usage-source=kubepods" in container["args"]
    assert "--kubelet-cgroup-root=/nodeqos-$(NODE_NAME)" in container["args"]
    args = [a.replace("$(NODE_NAME)", "n1") for a in container["args"]]
    params = cli.build_command().make_context("nodeqos-agent", args).params
    assert params["node_usage_source"] == "kubepods"
    assert str(params["kubelet_cgroup_root"]) == "nodeqos-n1"
    state = next(m for m in container["volumeMounts"] if m["name"] == "state")
    assert state["subPathExpr"] == "$(NODE_NAME)"
    volume = next(v for v in agent["volumes"] if v["name"] == "state")
    assert volume["hostPath"]["path"] == str(tmp_path / "state")


def test_descheduler_and_extender_configs_load_with_the_scenario_thresholds(
    tmp_path: Path,
) -> None:
    """The patched DeschedulerConfiguration and LoadAwareSchedulingArgs pass their loaders."""
    from descheduler import config, plugins
    from extender import args as extender_args

    docs = _docs(tmp_path)
    text = docs["ConfigMap/nodeqos-descheduler-config"]["data"]["descheduler.yaml"]
    loaded = config.load_config(text, plugins=plugins.in_tree())
    assert loaded.descheduling_interval.total_seconds() == 10
    (profile,) = loaded.profiles
    lownodeload = profile.plugin_config["LowNodeLoad"]
    assert lownodeload.high_thresholds["cpu"] == placementloop.HIGH_CPU
    assert lownodeload.low_thresholds["cpu"] == placementloop.LOW_CPU
    raw = docs["ConfigMap/nodeqos-scheduler-extender-config"]["data"]["loadaware.yaml"]
    decoded = extender_args.decode_args(yaml.safe_load(raw))
    assert decoded.usage_thresholds["cpu"] == placementloop.EXTENDER_CPU


def test_deploy_files_are_left_as_shipped(tmp_path: Path) -> None:
    """The overlay works on copies: deploy/ still has the placeholder and 2m cycles."""
    placementloop.manifests(IMAGE, tmp_path / "state")
    shipped = (placementloop.DEPLOY / "daemonset.yaml").read_text()
    assert "image: NODEQOS_IMAGE" in shipped and "--node-usage-source" not in shipped
    assert "deschedulingInterval: 2m" in (placementloop.DEPLOY / "descheduler.yaml").read_text()
