"""CustomPriority DrainNode with autoCordon against the real API server.

The cordon is a write to the Node, so it is tested where it lands: the source
node is cordoned and its pods evicted through the Eviction API; when a
PodDisruptionBudget refuses one, the node is uncordoned again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from descheduler import config, evictions, framework, plugins
from descheduler.framework import Reason
from kube import events, rest
from testbed import localcluster
from tests.descheduler import fakes
from tests.descheduler import test_evictor_controlplane as cp
from tests.descheduler.test_evictor_controlplane import LABEL, Cluster

pytestmark = pytest.mark.controlplane

cluster = cp.cluster  # the fixture: nodes labelled for this test, deleted afterwards


@pytest.fixture
def sources() -> Iterator[list[framework.InformerSource]]:
    """Informer sources the test starts; stopped afterwards."""
    started: list[framework.InformerSource] = []
    yield started
    for source in started:
        source.stop()


def runner(
    kube: rest.Rest, cluster: Cluster, started: list[framework.InformerSource]
) -> tuple[framework.Runner, framework.InformerSource]:
    args: dict[str, Any] = {
        "mode": "DrainNode",
        "autoCordon": True,
        "evictionOrder": [
            {"name": "on-demand", "nodeSelector": {"matchLabels": {"billing": "on-demand"}}},
            {"name": "spot", "nodeSelector": {"matchLabels": {"billing": "spot"}}},
        ],
    }
    raw = fakes.plugin_policy(
        "CustomPriority",
        args,
        point="balance",
        evictor={"nodeFit": False},
        nodeSelector=f"{LABEL}={cluster.namespace}",
    )
    registry = plugins.registry()
    cfg = config.decode_configuration(raw, plugins=registry.catalog())
    source = framework.InformerSource(kube).start()
    started.append(source)
    assert source.wait_synced(15)
    recorder = events.Recorder(kube, evictions.COMPONENT)
    built = framework.Runner.from_config(
        cfg,
        registry,
        source=source,
        backend=evictions.EvictionAPI(kube, recorder),
        metrics=framework.Metrics(CollectorRegistry()),
        client=kube,
        recorder=recorder,
    )
    return built, source


def label(kube: rest.Rest, node: str, billing: str) -> None:
    kube.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {"billing": billing}}})


@pytest.fixture
def two_tier(kube: rest.Rest, cluster: Cluster) -> Iterator[tuple[str, str]]:
    expensive, cheap = cluster.add_node("od"), cluster.add_node("spot")
    label(kube, expensive, "on-demand")
    label(kube, cheap, "spot")
    cluster.run_pod("web-0", "od", cpu="100m", owner="web", labels={"app": "web"})
    cluster.run_pod("web-1", "od", cpu="100m", owner="web", labels={"app": "web"})
    yield expensive, cheap


def unschedulable(kube: rest.Rest, node: str) -> bool:
    return bool(kube.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable"))


def test_drain_cordons_the_source_and_evicts_every_pod(
    kube: rest.Rest,
    cluster: Cluster,
    two_tier: tuple[str, str],
    sources: list[framework.InformerSource],
) -> None:
    """Both pods fit the spot node: the on-demand node is cordoned and emptied."""
    expensive, cheap = two_tier
    run, source = runner(kube, cluster, sources)
    cp.eventually(lambda: len(source.state().pods) >= 2, "the informer sees the pods")
    report = run.run_once()
    ns = cluster.namespace
    assert report.evicted_pods == [f"{ns}/web-0", f"{ns}/web-1"]
    assert unschedulable(kube, expensive)
    assert not unschedulable(kube, cheap)
    for name in ("web-0", "web-1"):
        assert cluster.pod(name)["metadata"].get("deletionTimestamp")


def test_a_refused_eviction_uncordons_the_source(
    kube: rest.Rest,
    cluster: Cluster,
    two_tier: tuple[str, str],
    sources: list[framework.InformerSource],
) -> None:
    """A PDB refuses the first eviction: nothing leaves and the node is schedulable again."""
    expensive, _ = two_tier
    kube.create(
        f"/apis/policy/v1/namespaces/{cluster.namespace}/poddisruptionbudgets",
        {
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    localcluster.sync_pdb_status(kube, cluster.namespace, "web")
    run, source = runner(kube, cluster, sources)
    cp.eventually(lambda: len(source.state().pdbs) >= 1, "the informer sees the PDB")
    report = run.run_once()
    assert report.evicted_pods == []
    assert report.skipped[0].reason_code is Reason.PDB_BLOCKED
    assert not unschedulable(kube, expensive)
