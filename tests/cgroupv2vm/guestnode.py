"""The VM as a node of the host's control plane: containerd, images, the kubelet, the
`kubernetes` Service route. Used by conftest.py's `joined` fixture; the tests here
drive the guest through testbed.vm and the API server through testbed.controlplane.

What differs from the real-node suite (testbed.localnodes), and why:

- the kubelet reaches the API server at ``https://10.0.2.100:6443``, a QEMU
  ``guestfwd`` to the host's loopback port (the guest's user network reaches
  nothing else), checking the serving certificate against its 127.0.0.1 name;
- pods reach it through the ``kubernetes`` Service (10.0.0.1:443, in the serving
  certificate) by the one rule kube-proxy would install, a DNAT in the guest to
  that guestfwd address, plus a MASQUERADE: QEMU's user network answers only
  addresses of its own 10.0.2.0/24, not the pods' 10.244.0.0/24;
- images come in on read-only disks and are imported with
  ``ctr -n k8s.io images import`` (the real-node suite imports the same archives).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from testbed import controlplane, nodeconfig, vm

NODE_NAME = "nodeqos-vm"
GUEST_ROOT = "/opt/nodeqos"
# The guest reaches the host's loopback API server at this address (QEMU guestfwd).
API_GUEST_IP, API_GUEST_PORT = "10.0.2.100", 6443
POD_SUBNET = "10.244.0.0/24"

KUBELET_CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
failSwapOn: false
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
serializeImagePulls: false
evictionHard: {memory.available: 1Mi, nodefs.available: 1%}
makeIPTablesUtilChains: false
localStorageCapacityIsolation: false
nodeStatusUpdateFrequency: 5s
syncFrequency: 5s
"""
# A bridge network with the default route through it (as the real-node suite's
# testbed.nodeconfig.cni_config): without a route a pod reaches only its own subnet,
# and the agent's connection to the `kubernetes` Service fails with ENETUNREACH.
CNI = json.dumps(
    {
        "cniVersion": "1.0.0",
        "name": "nodeqos-vm",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_SUBNET}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "loopback"},
        ],
    },
    indent=1,
)


def wait(what: str, seconds: float, probe: Callable[[], Any]) -> tuple[Any, float]:
    """Poll `probe` every second until truthy; its value and the seconds it took.
    Generous deadlines: under TCG on a busy host every step is slow."""
    started = time.monotonic()
    while not (value := probe()):
        assert time.monotonic() - started < seconds, f"{what} not within {seconds:.0f} s"
        time.sleep(1.0)
    return value, time.monotonic() - started


def start_containerd(machine: vm.VirtualMachine) -> float:
    """containerd with the pause image the kubelet's sandboxes use; seconds it took."""
    started = time.monotonic()
    machine.sh(
        f"sed -i 's#sandbox_image = .*#sandbox_image = \"{nodeconfig.PAUSE_IMAGE}\"#' "
        "/etc/containerd/config.toml && mkdir -p /etc/cni/net.d /var/lib/kubelet && "
        "systemctl start containerd && ctr version >/dev/null",
        timeout=300,
    )
    return time.monotonic() - started


def import_image(machine: vm.VirtualMachine, archive: str, timeout: float = 1200.0) -> float:
    """`ctr -n k8s.io images import` of an OCI archive (a file or a disk); seconds it took."""
    started = time.monotonic()
    machine.run(["ctr", "-n", "k8s.io", "images", "import", archive], timeout=timeout)
    return time.monotonic() - started


def route_kubernetes_service(machine: vm.VirtualMachine) -> None:
    """Pods' 10.0.0.1:443 to the API server's guestfwd address, as kube-proxy would."""
    target = f"{API_GUEST_IP}:{API_GUEST_PORT}"
    machine.sh(
        "sysctl -qw net.ipv4.ip_forward=1 && "
        f"iptables -w -t nat -A PREROUTING -d {controlplane.KUBERNETES_SERVICE_IP}/32 -p tcp "
        f"--dport 443 -j DNAT --to-destination {target} && "
        f"iptables -w -t nat -A OUTPUT -d {controlplane.KUBERNETES_SERVICE_IP}/32 -p tcp "
        f"--dport 443 -j DNAT --to-destination {target} && "
        f"iptables -w -t nat -A POSTROUTING -s {POD_SUBNET} -o eth0 -j MASQUERADE",
        timeout=120,
    )


def start_kubelet(machine: vm.VirtualMachine) -> None:
    """The pinned kubelet (copied in at GUEST_ROOT/bin) as the transient unit kubelet-join."""
    machine.run(["tee", "/etc/cni/net.d/10-nodeqos.conflist"], stdin=CNI.encode())
    machine.run(["tee", "/etc/kubelet-join.yaml"], stdin=KUBELET_CONFIG.encode())
    machine.run(
        [
            "systemd-run",
            "--unit=kubelet-join",
            f"{GUEST_ROOT}/bin/kubelet",
            "--config=/etc/kubelet-join.yaml",
            f"--kubeconfig={GUEST_ROOT}/node.kubeconfig",
            f"--hostname-override={NODE_NAME}",
            "--v=1",
        ]
    )


def node_ready(plane: controlplane.ControlPlane) -> bool:
    """The VM's Node exists and is Ready."""
    try:
        node = plane.request("GET", f"/api/v1/nodes/{NODE_NAME}")
    except Exception:  # not registered yet
        return False
    conditions = node.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def stop_node(machine: vm.VirtualMachine) -> str:
    """Stop the kubelet and kill every pod (a busybox sleep ignores SIGTERM, and power-off
    would wait on it); returns the kubelet's journal tail."""
    log = machine.sh("journalctl -u kubelet-join --no-pager | tail -n 30", check=False)
    machine.sh(
        "systemctl stop kubelet-join; systemctl kill --signal=KILL kubepods.slice; "
        "systemctl stop kubepods.slice containerd",
        check=False,
        timeout=180,
    )
    return log.text
