"""The `kubernetes` Service on real nodes of this machine: 10.0.0.1:443 -> the API server.

In a real cluster kube-proxy (or a CNI) routes the Service's ClusterIP to the
API server's endpoints; pods find it through ``KUBERNETES_SERVICE_HOST`` and
``KUBERNETES_SERVICE_PORT``, which the kubelet sets from the Service. The local
nodes (`testbed.localnodes`) run no kube-proxy, so this module installs the one
rule kube-proxy would: a DNAT of the ClusterIP's port 443 to the host address
and port the API server listens on, in ``nat PREROUTING`` (pods' traffic
arriving from their bridges) and ``nat OUTPUT`` (host-network pods and the
host itself).

The rules live in a chain of our own, ``NODEQOS-KUBERNETES``, so that
installing twice replaces the target instead of stacking rules, and removal
takes exactly what we added. The target is a host address (not 127.0.0.1):
DNAT to loopback from a bridge would need ``route_localnet``, which opens
loopback services to the whole link.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

CHAIN = "NODEQOS-KUBERNETES"
HOOKS = ("PREROUTING", "OUTPUT")
HOW_TO_FIX = "Run hack/host-setup.sh as root (it installs Debian's iptables) and run as root."


class ServiceNatError(RuntimeError):
    """The rules could not be installed; the message names the failing command."""


def _iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("iptables")
    if binary is None:
        raise ServiceNatError(f"no iptables on PATH. {HOW_TO_FIX}")
    cmd = [binary, "-w", "-t", "nat", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=60)
    if check and done.returncode != 0:
        raise ServiceNatError(f"{' '.join(cmd)}: {done.stderr.strip()}. {HOW_TO_FIX}")
    return done


def rules(service_ip: str, target_ip: str, target_port: int) -> list[list[str]]:
    """The chain's rules as iptables arguments (without ``-A CHAIN``)."""
    return [
        [
            "-d",
            f"{service_ip}/32",
            "-p",
            "tcp",
            "--dport",
            "443",
            "-m",
            "comment",
            "--comment",
            "nodeqos: default/kubernetes:https",
            "-j",
            "DNAT",
            "--to-destination",
            f"{target_ip}:{target_port}",
        ]
    ]


def install(service_ip: str, target_ip: str, target_port: int) -> None:
    """Route service_ip:443 to target_ip:target_port; idempotent (replaces an old target)."""
    if _iptables("-n", "-L", CHAIN, check=False).returncode != 0:
        _iptables("-N", CHAIN)
    _iptables("-F", CHAIN)
    for rule in rules(service_ip, target_ip, target_port):
        _iptables("-A", CHAIN, *rule)
    for hook in HOOKS:
        if _iptables("-C", hook, "-j", CHAIN, check=False).returncode != 0:
            _iptables("-I", hook, "1", "-j", CHAIN)


def remove(hooks: Sequence[str] = HOOKS) -> None:
    """Remove the jumps and the chain; a missing chain or iptables is fine (nothing to undo)."""
    if shutil.which("iptables") is None:
        return
    for hook in hooks:
        while _iptables("-D", hook, "-j", CHAIN, check=False).returncode == 0:
            pass
    _iptables("-F", CHAIN, check=False)
    _iptables("-X", CHAIN, check=False)
