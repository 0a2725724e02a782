"""nodeqos-manager: the cluster-wide controller of colocation policy.

It renders one NodeSLO and one NodeMetric spec per node from Koordinator's
`slo-controller-config` ConfigMap (docs/manager.md); `noderesource` computes
the Batch resources of Nodes and `colocationprofile` renders
ClusterColocationProfiles as MutatingAdmissionPolicies (docs/colocation.md).

Of ours it may import `kube` only.
"""
