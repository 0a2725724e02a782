"""The eviction backends against the real API server: Events, PDBs, vanished pods."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from descheduler import config, evictions, framework
from descheduler.framework import Reason
from kube import events, eviction, objects, rest
from testbed import localcluster
from tests.descheduler import fakes

pytestmark = pytest.mark.controlplane

OPTIONS = evictions.EvictOptions(plugin="LowNodeLoad", reason="node n1 is hot", profile="p1")


def run_pod(kube: rest.Rest, namespace: str, name: str, app: str = "web") -> objects.Pod:
    created = kube.create(
        f"/api/v1/namespaces/{namespace}/pods",
        {
            "metadata": {"name": name, "labels": {"app": app}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
        },
    )
    return objects.Pod.from_api(localcluster.mark_running(kube, created))


def block_with_pdb(kube: rest.Rest, namespace: str) -> None:
    kube.create(
        f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
        {
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    localcluster.sync_pdb_status(kube, namespace, "web")


def event_list(kube: rest.Rest, namespace: str) -> list[tuple[str, str, str, str]]:
    items = kube.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    return [(e["type"], e["reason"], e["involvedObject"]["name"], e["message"]) for e in items]


def test_eviction_api_records_who_and_why(kube: rest.Rest, namespace: str) -> None:
    """An eviction starts graceful deletion and leaves a Descheduled Event naming plugin and reason."""
    pod = run_pod(kube, namespace, "p")
    backend = evictions.EvictionAPI(kube, events.Recorder(kube, evictions.COMPONENT))
    assert backend.evict(pod, OPTIONS).ok
    assert kube.get(f"/api/v1/namespaces/{namespace}/pods/p")["metadata"]["deletionTimestamp"]
    assert event_list(kube, namespace) == [
        (
            "Normal",
            "Descheduled",
            "p",
            "pod evicted from node n1 by LowNodeLoad, profile p1: node n1 is hot",
        )
    ]


def test_pdb_refusal_is_classified_and_optionally_announced(
    kube: rest.Rest, namespace: str
) -> None:
    """429 → PDB_BLOCKED; with failure events on, a Warning says so on the pod."""
    pod = run_pod(kube, namespace, "p")
    block_with_pdb(kube, namespace)
    quiet = evictions.EvictionAPI(kube, events.Recorder(kube, evictions.COMPONENT))
    assert quiet.evict(pod, OPTIONS).outcome is eviction.Outcome.PDB_BLOCKED
    assert event_list(kube, namespace) == []
    loud = evictions.EvictionAPI(
        kube, events.Recorder(kube, evictions.COMPONENT), failure_events=True
    )
    assert loud.evict(pod, OPTIONS).outcome is eviction.Outcome.PDB_BLOCKED
    [(kind, reason, name, message)] = event_list(kube, namespace)
    assert (kind, reason, name) == ("Warning", "EvictionFailed", "p")
    assert message.startswith("eviction by LowNodeLoad failed (pdb_blocked): ")


def test_delete_backend_bypasses_pdbs(kube: rest.Rest, namespace: str) -> None:
    """Delete is the opt-in that ignores budgets; it still records the Event."""
    pod = run_pod(kube, namespace, "p")
    block_with_pdb(kube, namespace)
    backend = evictions.Delete(
        kube, events.Recorder(kube, evictions.COMPONENT), grace_period_seconds=0
    )
    assert backend.evict(pod, OPTIONS).ok
    with pytest.raises(rest.ApiError) as caught:
        kube.get(f"/api/v1/namespaces/{namespace}/pods/p")
    assert caught.value.not_found
    assert [e[1] for e in event_list(kube, namespace)] == ["Descheduled"]


def test_vanished_and_replaced_pods_are_pod_gone(kube: rest.Rest, namespace: str) -> None:
    """A stale snapshot: one pod deleted, one recreated with a new UID → pod_gone, no crash."""
    gone, replaced = run_pod(kube, namespace, "gone"), run_pod(kube, namespace, "replaced")
    for name in ("gone", "replaced"):
        kube.delete(f"/api/v1/namespaces/{namespace}/pods/{name}", {"gracePeriodSeconds": 0})
    run_pod(kube, namespace, "replaced")
    source = framework.StaticSource(nodes=fakes.nodes("n1", "n2"), pods=[gone, replaced])
    raw: dict[str, Any] = fakes.policy(
        profiles=[
            {
                "name": "p",
                "plugins": {
                    "filter": {"disabled": [{"name": "*"}]},
                    "preEvictionFilter": {"disabled": [{"name": "*"}]},
                    "balance": {"enabled": ["All"]},
                },
            }
        ]
    )
    registry = fakes.registry_with(All=fakes.evict_all)
    metrics = CollectorRegistry()
    runner = framework.Runner.from_config(
        config.decode_configuration(raw, plugins=registry.catalog()),
        registry,
        source=source,
        backend=evictions.EvictionAPI(kube),
        metrics=framework.Metrics(metrics),
    )
    report = runner.run_once()
    assert report.evictions == () and report.failures == ()
    assert [(s.pod, s.reason_code) for s in report.skipped] == [
        (f"{namespace}/gone", Reason.POD_GONE),
        (f"{namespace}/replaced", Reason.POD_GONE),
    ]
    assert (
        kube.get(f"/api/v1/namespaces/{namespace}/pods/replaced")["metadata"].get(
            "deletionTimestamp"
        )
        is None
    )
