"""nodeqos-manager: renders one NodeSLO and one NodeMetric spec per node from
Koordinator's `slo-controller-config` ConfigMap (docs/manager.md).

Of ours it may import `kube` only.
"""
