"""The Eviction API as nodeqos uses it: PDBs enforced by the server, outcomes classified, Events."""

from __future__ import annotations

from typing import Any

import pytest

from kube import events, eviction, rest
from testbed import controlplane, localcluster

pytestmark = pytest.mark.controlplane


def run_pod(
    kube: rest.Rest, namespace: str, name: str, *, app: str = "web", node: str = "n1"
) -> dict[str, Any]:
    pod = kube.create(
        f"/api/v1/namespaces/{namespace}/pods",
        {
            "metadata": {"name": name, "labels": {"app": app}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
        },
    )
    return localcluster.mark_running(kube, pod)


def pdb(kube: rest.Rest, namespace: str, name: str, app: str, min_available: int) -> None:
    kube.create(
        f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
        {
            "metadata": {"name": name},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}},
        },
    )
    localcluster.sync_pdb_status(kube, namespace, name)


def test_pdb_blocks_with_429_and_allows_when_budget_left(kube: rest.Rest, namespace: str) -> None:
    """minAvailable 3 of 3 → pdb_blocked; minAvailable 2 of 3 → exactly one eviction allowed."""
    pods = [run_pod(kube, namespace, f"web-{i}") for i in range(3)]
    pdb(kube, namespace, "web", "web", 3)
    blocked = eviction.evict(kube, namespace, "web-0", uid=pods[0]["metadata"]["uid"])
    assert blocked.outcome is eviction.Outcome.PDB_BLOCKED
    assert "disruption budget" in blocked.message
    kube.patch(
        f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/web",
        {"spec": {"minAvailable": 2}},
    )
    localcluster.sync_pdb_status(kube, namespace, "web")
    first = eviction.evict(kube, namespace, "web-0", uid=pods[0]["metadata"]["uid"])
    second = eviction.evict(kube, namespace, "web-1", uid=pods[1]["metadata"]["uid"])
    assert (first.outcome, second.outcome) == (
        eviction.Outcome.EVICTED,
        eviction.Outcome.PDB_BLOCKED,
    )


def test_evicted_pod_terminates_and_is_finished(kube: rest.Rest, namespace: str) -> None:
    """An eviction without a PDB starts graceful deletion; the played kubelet finishes it."""
    pod = run_pod(kube, namespace, "lonely")
    assert eviction.evict(kube, namespace, "lonely", uid=pod["metadata"]["uid"]).ok
    assert kube.get(f"/api/v1/namespaces/{namespace}/pods/lonely")["metadata"]["deletionTimestamp"]
    assert localcluster.finish_terminating(kube, namespace) == [f"{namespace}/lonely"]
    with pytest.raises(rest.ApiError) as caught:
        kube.get(f"/api/v1/namespaces/{namespace}/pods/lonely")
    assert caught.value.not_found


@pytest.mark.parametrize(
    ("name", "uid", "expected"),
    [
        pytest.param("ghost", None, eviction.Outcome.NOT_FOUND, id="vanished-pod"),
        pytest.param(
            "real",
            "00000000-0000-0000-0000-000000000000",
            eviction.Outcome.UID_MISMATCH,
            id="namesake-with-other-uid",
        ),
    ],
)
def test_outcomes_are_classified(
    kube: rest.Rest, namespace: str, name: str, uid: str | None, expected: eviction.Outcome
) -> None:
    """A vanished pod and a UID precondition failure are told apart from errors."""
    run_pod(kube, namespace, "real")
    assert eviction.evict(kube, namespace, name, uid=uid).outcome is expected


def test_forbidden_without_rbac(
    control_plane: controlplane.ControlPlane, kube: rest.Rest, namespace: str
) -> None:
    """A ServiceAccount without pods/eviction rights gets FORBIDDEN, not a crash."""
    run_pod(kube, namespace, "p")
    identity = control_plane.service_account(namespace, "weak")
    weak = rest.Rest.from_kubeconfig(identity.kubeconfig, qps=0)
    assert eviction.evict(weak, namespace, "p").outcome is eviction.Outcome.FORBIDDEN


def test_unreachable_server_is_unavailable() -> None:
    """A dead endpoint yields UNAVAILABLE rather than raising."""
    import kubernetes.client

    config = kubernetes.client.Configuration()
    config.host = f"http://127.0.0.1:{controlplane.free_port()}"
    client = rest.Rest(kubernetes.client.ApiClient(config), qps=0, timeout=2)
    assert eviction.evict(client, "default", "p").outcome is eviction.Outcome.UNAVAILABLE


def test_event_is_recorded_on_the_pod(kube: rest.Rest, namespace: str) -> None:
    """Recorder writes a core/v1 Event that points at the pod."""
    pod = run_pod(kube, namespace, "evictee")
    recorder = events.Recorder(kube, "nodeqos-test", "n1")
    assert recorder.event(
        events.ObjectRef.of({**pod, "kind": "Pod"}), events.WARNING, "Evicted", "usage too high"
    )
    listed = kube.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    assert [
        (e["reason"], e["involvedObject"]["name"], e["source"]["component"]) for e in listed
    ] == [("Evicted", "evictee", "nodeqos-test")]
