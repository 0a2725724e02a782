"""Configuration files of one real node (`testbed.localnodes`), as pure functions of
its name, index and directory: containerd's config.toml, the CNI network, and the
KubeletConfiguration. The reasons for each setting are in `testbed.localnodes`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

PAUSE_IMAGE = "nodeqos.local/pause:1"
CNI_BIN_DIR = Path("/usr/lib/cni")


def containerd_config(workdir: Path) -> str:
    """containerd 1.6 configuration (version 2) for one node."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""\
version = 2
root = "{workdir / "containerd" / "root"}"
state = "{workdir / "containerd" / "state"}"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
]
[grpc]
  address = "{workdir / "containerd.sock"}"
[ttrpc]
  address = "{workdir / "containerd.ttrpc.sock"}"
[debug]
  address = ""
[metrics]
  address = ""
[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{workdir / "runc"}"
  [{cri}.cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{workdir / "cni"}"
"""


def cni_config(name: str, index: int, workdir: Path) -> dict[str, Any]:
    """A bridge network of the node's own: pods get 10.244.<index>.0/24."""
    return {
        "cniVersion": "1.0.0",
        "name": f"nodeqos-{name}",
        "plugins": [
            {
                "type": "bridge",
                "bridge": f"nqbr{index}",
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": f"10.244.{index}.0/24"}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(workdir / "cni-ipam"),
                },
            },
            {"type": "loopback"},
        ],
    }


def kubelet_config(
    name: str, workdir: Path, *, port: int, healthz_port: int, extra: Mapping[str, Any]
) -> dict[str, Any]:
    """KubeletConfiguration for one node (see the module docstring for the why)."""
    socket = f"unix://{workdir / 'containerd.sock'}"
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": "127.0.0.1",
        "port": port,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "readOnlyPort": 0,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/nodeqos-{name}",
        "cgroupsPerQOS": True,
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": socket,
        "imageServiceEndpoint": socket,
        "podLogsDir": str(workdir / "pod-logs"),
        "serializeImagePulls": False,
        # One disk shared by every node: let no node evict for disk or image space.
        "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "makeIPTablesUtilChains": False,
        "localStorageCapacityIsolation": False,
        # Quick reactions in a cluster that lives for one test run.
        "syncFrequency": "5s",
        "nodeStatusUpdateFrequency": "5s",
        "fileCheckFrequency": "5s",
    }
    config.update(extra)
    return config
