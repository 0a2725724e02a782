"""Pods for the e2e suite: busybox workloads and waiting on what the kubelet reports."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kube import rest
from testbed import localnodes
from tests.waiting import eventually

BUSY_LOOP = "while :; do :; done"
IDLE = "sleep 100000"


def pod(
    name: str,
    *,
    node: str | None = None,
    command: str = IDLE,
    cpu: str | None = None,
    memory: str = "32Mi",
    requests_only: bool = False,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A busybox pod; with `cpu` it is Guaranteed (limits) or Burstable (`requests_only`),
    without it BestEffort."""
    resources: dict[str, Any] = {}
    if cpu is not None:
        amounts = {"cpu": cpu, "memory": memory}
        resources = {"requests": amounts} if requests_only else {"limits": amounts}
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": localnodes.BUSYBOX_IMAGE,
                "imagePullPolicy": "Never",
                "command": ["sh", "-c", command],
                "resources": resources,
            }
        ],
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": False,
    }
    if node is not None:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "labels": dict(labels or {})}, "spec": spec}


def wait_for(
    check: Callable[[], Any], what: str, *, timeout: float = 60.0, interval: float = 0.5
) -> Any:
    """`tests.waiting.eventually` with the e2e defaults: real nodes answer in seconds, not ms."""
    return eventually(check, what, timeout, interval=interval)


def wait_running(kube: rest.Rest, namespace: str, names: Sequence[str]) -> list[dict[str, Any]]:
    """Wait until every named pod is Running with all containers ready; returns them."""

    def all_running() -> list[dict[str, Any]] | None:
        pods = [kube.get(f"/api/v1/namespaces/{namespace}/pods/{n}") for n in names]
        for p in pods:
            statuses = p["status"].get("containerStatuses", [])
            if p["status"].get("phase") != "Running" or not all(s["ready"] for s in statuses):
                return None
        return pods

    result: list[dict[str, Any]] = wait_for(all_running, f"pods {list(names)} Running", timeout=90)
    return result
