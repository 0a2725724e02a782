"""nodeqos on a real cgroup v2 kernel under systemd, in a QEMU VM (`make e2e-cgroupv2`).

Each check of guest_checks.py runs inside the VM (see conftest.py); here one
host test per check reports its outcome, so a failure names the check and
carries the guest's assertion message. The list of checks is read from
guest_checks.py itself, so a new check is reported without touching this file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from testbed import controlplane, localnodes
from tests.cgroupv2vm import guestnode
from tests.cgroupv2vm.conftest import NODE_NAME, GuestRun, JoinedNode, required

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


def test_kubelet_joins_the_local_control_plane_and_runs_a_pod(joined: JoinedNode) -> None:
    """The pinned kubelet (cgroupDriver: systemd) in the VM registers with the host's API
    server through QEMU's guestfwd, goes Ready, and runs a BestEffort pod whose cgroup is
    kubepods-besteffort-pod<uid>.slice on the real v2 tree (kubelet start and pod start timed)."""
    machine, plane = joined.machine, joined.plane
    uid = _run_pod(plane)
    _, pod_s = guestnode.wait("pod Running", 300, lambda: _pod_phase(plane) == "Running")
    slice_name = f"kubepods-besteffort-pod{uid.replace('-', '_')}.slice"
    found = machine.sh(
        f"ls -d /sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/{slice_name}",
        check=False,
    )
    print(
        f"cgroupv2vm: kubelet start to node Ready {joined.ready_seconds:.1f}s; "
        f"pod start {pod_s:.1f}s"
    )
    assert found.rc == 0, f"no {slice_name}: {found.stderr.decode()}"


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
