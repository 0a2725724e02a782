"""The local-cluster test bench: what tests, benchmarks and the demo run nodeqos on.

A real control plane built from the pinned Go modules in ``hack/`` (etcd,
kube-apiserver, kube-scheduler, kube-controller-manager: `controlplane`,
`components`), real nodes on this machine (a kubelet and a containerd each:
`localnodes`, `nodeconfig`, `ociimage`, `servicenat`, `machinelock`), the
in-process stand-in for a kubelet where real nodes cannot run (`localcluster`)
and the placement scenario both the demo and the e2e suite run
(`placementloop`, `placementwatch`).

It is not part of the product: ``pyproject.toml`` does not install it and the
image does not copy it (tests/test_layering.py and tests/deploy/test_image.py
hold both). It may import ``kube``; no product package may import it.
"""
