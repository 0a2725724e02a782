"""nodeqos-manager: the cluster-side colocation controller (Batch resources of Nodes,
colocation profiles). May import `kube`."""
