"""nodeqos on a real cgroup v2 kernel under systemd, in a QEMU VM (`make e2e-cgroupv2`).

Each check of guest_checks.py runs inside the VM (see conftest.py); here one
host test per check reports its outcome, so a failure names the check and
carries the guest's assertion message. The list of checks is read from
guest_checks.py itself, so a new check is reported without touching this file.
"""

from __future__ import annotations

import ast
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from testbed import controlplane, localnodes, nodeconfig
from tests.cgroupv2vm.conftest import NODE_NAME, GuestRun, required

pytestmark = [pytest.mark.cgroupv2vm, pytest.mark.slow]

GUEST_CHECKS = Path(__file__).with_name("guest_checks.py")


def _check_names() -> list[str]:
    tree = ast.parse(GUEST_CHECKS.read_text())
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    ]


def test_the_guest_checks_are_found() -> None:
    """guest_checks.py holds the checks this module reports (a rename cannot hide one)."""
    assert len(_check_names()) >= 6


@pytest.mark.parametrize("name", _check_names())
def test_guest_check(guest: GuestRun, name: str) -> None:
    """The named check passed inside the VM (its assertion message is shown when not)."""
    outcome = guest.outcomes.get(name)
    assert outcome is not None, (
        f"{name} did not run in the guest; guest output:\n{guest.output[-4000:]}"
    )
    if outcome == "skipped" and not required():
        pytest.skip(f"{name} skipped in the guest: {guest.details[name]}")
    assert outcome == "passed", f"{name} {outcome} in the guest:\n{guest.details[name]}"


def test_guest_booted_systemd_and_its_agent(guest: GuestRun) -> None:
    """Both boot milestones were seen: systemd's banner on the console and the agent's answer."""
    assert guest.machine.times.agent is not None
    assert guest.machine.times.systemd is not None
    assert "Welcome to" in guest.machine.console_log.read_text(errors="replace")


GUEST_KUBELET_CONFIG = """\
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
GUEST_CNI = """\
{"cniVersion": "1.0.0", "name": "nodeqos-vm", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]]}},
  {"type": "loopback"}]}
"""


def _wait(what: str, seconds: float, probe: Callable[[], bool]) -> float:
    started = time.monotonic()
    while not probe():
        assert time.monotonic() - started < seconds, f"{what} not within {seconds:.0f} s"
        time.sleep(1.0)
    return time.monotonic() - started


def test_kubelet_joins_the_local_control_plane_and_runs_a_pod(guest: GuestRun) -> None:
    """The pinned kubelet (cgroupDriver: systemd) in the VM registers with the host's API
    server through QEMU's guestfwd, goes Ready, and runs a BestEffort pod whose cgroup is
    kubepods-besteffort-pod<uid>.slice on the real v2 tree (kubelet start and pod start timed)."""
    if guest.plane is None:
        if required():
            pytest.fail(f"no control plane: {guest.plane_missing}")
        pytest.skip(f"no control plane: {guest.plane_missing}")
    machine, plane = guest.machine, guest.plane
    root = "/opt/nodeqos"
    if machine.run(["test", "-x", f"{root}/bin/kubelet"], check=False).rc != 0:
        if required():
            pytest.fail("no kubelet was copied in (hack/node-setup.sh builds it)")
        pytest.skip("no kubelet was copied in (hack/node-setup.sh builds it)")
    machine.sh(
        f"sed -i 's#sandbox_image = .*#sandbox_image = \"{nodeconfig.PAUSE_IMAGE}\"#' "
        "/etc/containerd/config.toml && mkdir -p /etc/cni/net.d /var/lib/kubelet && "
        "systemctl start containerd && "
        f"ctr -n k8s.io images import {root}/images/pause.tar && "
        f"ctr -n k8s.io images import {root}/images/busybox.tar",
        timeout=300,
    )
    machine.run(["tee", "/etc/cni/net.d/10-nodeqos.conflist"], stdin=GUEST_CNI.encode())
    machine.run(["tee", "/etc/kubelet-join.yaml"], stdin=GUEST_KUBELET_CONFIG.encode())
    machine.run(
        [
            "systemd-run",
            "--unit=kubelet-join",
            f"{root}/bin/kubelet",
            "--config=/etc/kubelet-join.yaml",
            f"--kubeconfig={root}/node.kubeconfig",
            f"--hostname-override={NODE_NAME}",
            "--v=1",
        ]
    )

    def node_ready() -> bool:
        try:
            node = plane.request("GET", f"/api/v1/nodes/{NODE_NAME}")
        except Exception:  # not registered yet
            return False
        conditions = node.get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    try:
        ready_s = _wait("node Ready", 300, node_ready)
        uid = _run_pod(plane)
        pod_s = _wait("pod Running", 300, lambda: _pod_phase(plane) == "Running")
        slice_name = f"kubepods-besteffort-pod{uid.replace('-', '_')}.slice"
        found = machine.sh(
            f"ls -d /sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/{slice_name}",
            check=False,
        )
        print(f"cgroupv2vm: kubelet start to node Ready {ready_s:.1f}s; pod start {pod_s:.1f}s")
        assert found.rc == 0, f"no {slice_name}: {found.stderr.decode()}"
    finally:
        log = machine.sh("journalctl -u kubelet-join --no-pager | tail -n 30", check=False)
        # The pod's sleep ignores SIGTERM: kill the pods so power-off does not wait on them.
        machine.sh(
            "systemctl stop kubelet-join; systemctl kill --signal=KILL kubepods.slice; "
            "systemctl stop kubepods.slice containerd",
            check=False,
        )
        print(log.text)


POD = "vm-busy"


def _run_pod(plane: controlplane.ControlPlane) -> str:
    pod = plane.request(
        "POST",
        "/api/v1/namespaces/default/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": POD},
            "spec": {
                "nodeName": NODE_NAME,
                "containers": [
                    {
                        "name": "busy",
                        "image": localnodes.BUSYBOX_IMAGE,
                        "imagePullPolicy": "Never",
                        "command": ["sleep", "3600"],
                    }
                ],
                "tolerations": [{"operator": "Exists"}],
            },
        },
    )
    return str(pod["metadata"]["uid"])


def _pod_phase(plane: controlplane.ControlPlane) -> str:
    return str(
        plane.request("GET", f"/api/v1/namespaces/default/pods/{POD}")["status"].get("phase")
    )
