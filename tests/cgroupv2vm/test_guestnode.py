"""The VM node's pod network matches the real-node suite's in what pods need."""

from __future__ import annotations

import json
from pathlib import Path

from testbed import nodeconfig
from tests.cgroupv2vm import guestnode


def test_guest_pods_get_the_default_route_the_real_nodes_give() -> None:
    """Without a default route a pod reaches only its subnet: the agent's connection to
    the `kubernetes` Service (10.0.0.1) failed with ENETUNREACH on the VM node."""
    guest = json.loads(guestnode.CNI)["plugins"][0]
    real = nodeconfig.cni_config("n1", 1, Path("/unused"))["plugins"][0]
    assert guest["type"] == real["type"] == "bridge"
    assert guest["isGateway"] and real["isGateway"]
    assert guest["ipam"]["routes"] == real["ipam"]["routes"] == [{"dst": "0.0.0.0/0"}]
    assert guest["ipam"]["ranges"] == [[{"subnet": guestnode.POD_SUBNET}]]
