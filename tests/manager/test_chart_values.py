"""The chart's manager values: the rendered ConfigMap is one the manager loads, and the
ConfigMap namespace moves the config Role with it."""

from __future__ import annotations

from typing import Any

from manager import render, sloconfig
from tests import helmchart


def by_kind_name(docs: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in docs}


def test_slo_config_values_render_a_configmap_the_manager_loads() -> None:
    """A threshold set in values reaches the rendered NodeSLO spec."""
    values = {
        "manager": {
            "configNamespace": "koordinator-system",
            "sloConfig": {
                "resource-threshold-config": {
                    "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 55}
                }
            },
        }
    }
    docs = by_kind_name(helmchart.template(values))
    configmap = docs["ConfigMap", "koordinator-system", "slo-controller-config"]
    loaded = sloconfig.load(configmap["data"])
    assert loaded.problems == ()
    spec = render.nodeslo_spec(loaded.config, {})["resourceUsedThresholdWithBE"]
    assert (spec["enable"], spec["cpuSuppressThresholdPercent"]) == (True, 55)
    assert ("Role", "koordinator-system", "nodeqos-manager-config") in docs
    (manager,) = docs["Deployment", "nodeqos-system", "nodeqos-manager"]["spec"]["template"][
        "spec"
    ]["containers"]
    assert "--config-namespace=koordinator-system" in manager["args"]
