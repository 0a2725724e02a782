"""What the manager writes for one node: its NodeSLO spec and NodeMetric spec.

Pure functions of the loaded `sloconfig.SLOConfig` and the node's labels; the
reconciler (`manager.reconcile`) compares their output with what is stored and
writes only the difference. The spec is Koordinator's `getNodeSLOSpec`
(`pkg/slo-controller/nodeslo/nodeslo_controller.go`): each strategy is the node's
strategy of its key, whole; the agent merges it over its own defaults
(`kube.nodeslo.merge_over_defaults`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from kube import nodeslo, quantity, slo
from manager import sloconfig

__all__ = [
    "BANDWIDTH_ANNOTATION",
    "OPT_OUT_ANNOTATION",
    "nodemetric_spec",
    "nodeslo_spec",
    "owner_reference",
]

log = logging.getLogger("manager.render")

# A NodeSLO (or NodeMetric) carrying this annotation with "false" is left alone.
OPT_OUT_ANNOTATION = "nodeqos.io/managed-by-manager"
# A Node's own total network bandwidth; wins over system-config's (Koordinator
# apis/extension/node_qos.go AnnotationNodeBandwidth, read in getSystemConfigSpec).
BANDWIDTH_ANNOTATION = "node.koordinator.sh/network-bandwidth"


def node_bandwidth(annotations: Mapping[str, str]) -> str | None:
    """The Node's bandwidth annotation when it is a valid quantity (else logged, None)."""
    value = annotations.get(BANDWIDTH_ANNOTATION)
    if value is None:
        return None
    try:
        quantity.parse_quantity(value)
    except ValueError:
        log.warning("ignoring %s=%r: not a quantity", BANDWIDTH_ANNOTATION, value)
        return None
    return value


def nodeslo_spec(
    config: sloconfig.SLOConfig, labels: Mapping[str, str], bandwidth: str | None = None
) -> dict[str, Any]:
    """The NodeSLO `spec` (wire form) for a node with these labels (and the valid
    value of its bandwidth annotation, `node_bandwidth`).

    `config.nodeslo_ready` must hold (every key has a good value).
    """
    if not config.nodeslo_ready:
        raise ValueError("the SLO config has a key without a good value; render nothing")
    assert config.threshold and config.resource_qos and config.cpu_burst and config.system
    assert config.host_applications is not None
    apps = config.host_applications.for_labels(labels)
    system = config.system.for_labels(labels)
    if bandwidth is not None:
        system = dataclasses.replace(system, total_network_bandwidth=bandwidth)
    spec = nodeslo.NodeSLOSpec(
        resource_used_threshold_with_be=config.threshold.for_labels(labels),
        resource_qos_strategy=config.resource_qos.for_labels(labels),
        cpu_burst_strategy=config.cpu_burst.for_labels(labels),
        system_strategy=system,
        host_applications=list(apps) if apps else None,
    )
    return spec.to_api()


def nodemetric_spec(config: sloconfig.SLOConfig, labels: Mapping[str, str]) -> dict[str, Any]:
    """The NodeMetric `spec` (wire form): the collect policy of the node's colocation strategy."""
    colocation = config.colocation or sloconfig.Colocation()
    policy = colocation.for_labels(labels).collect_policy()
    return slo.NodeMetricSpec(collect_policy=policy).to_api()


def owner_reference(node_name: str, node_uid: str) -> dict[str, Any]:
    """An ownerReference to the Node, so the garbage collector deletes with it."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "name": node_name,
        "uid": node_uid,
        "blockOwnerDeletion": False,
    }
