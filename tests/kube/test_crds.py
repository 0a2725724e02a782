"""The CRDs in deploy/crds/ on the real API server: established, round-tripped, enforced."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kube import classify, rest, slo
from kube.quantity import Resources

pytestmark = pytest.mark.controlplane

NODEMETRICS = rest.object_path("slo.koordinator.sh", "v1alpha1", "nodemetrics")


def status() -> slo.NodeMetricStatus:
    usage = Resources({"cpu": 1500, "memory": 123456789})
    full = slo.AggregatedUsage(timedelta(minutes=5), {kind: usage for kind in slo.AggregationType})
    return slo.NodeMetricStatus(
        update_time=datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC),
        node_metric=slo.NodeMetricInfo(
            node_usage=usage,
            system_usage=Resources({"cpu": 100, "memory": 1024}),
            aggregated_node_usages=(full, slo.AggregatedUsage.empty(timedelta(minutes=30))),
        ),
        pods_metric=(
            slo.PodMetricInfo(
                name="web-0",
                namespace="default",
                pod_usage=Resources({"cpu": 250}),
                priority=classify.PriorityClass.PROD,
                qos=classify.KoordQOS.LS,
            ),
        ),
        prod_reclaimable=Resources({"cpu": 1450, "memory": 1 << 30}),
        prod_peak=Resources({"cpu": 550, "memory": 0}),
    )


def test_crds_are_established(kube: rest.Rest) -> None:
    """All three CRDs are served, cluster-scoped, with a status subresource."""
    crds = kube.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")["items"]
    by_name = {c["metadata"]["name"]: c for c in crds}
    for name in (
        "nodemetrics.slo.koordinator.sh",
        "nodeslos.slo.koordinator.sh",
        "podmigrationjobs.scheduling.koordinator.sh",
    ):
        crd = by_name[name]
        assert crd["spec"]["scope"] == "Cluster"
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions["Established"] == "True"
        assert crd["spec"]["versions"][0]["subresources"].get("status") == {}


def test_nodemetric_round_trips_through_the_server(kube: rest.Rest) -> None:
    """Create with the default spec, write status through /status, read it back into an equal model.

    The prediction fields too: a field the schema did not list would be pruned.
    """
    created = kube.create(NODEMETRICS, slo.NodeMetric.for_node("rt-node").to_api())
    assert created["spec"]["metricCollectPolicy"]["aggregateDurationSeconds"] == 300
    created["status"] = status().to_api()
    kube.replace(
        rest.object_path(
            "slo.koordinator.sh", "v1alpha1", "nodemetrics", "rt-node", subresource="status"
        ),
        created,
    )
    read = slo.NodeMetric.from_api(kube.get(f"{NODEMETRICS}/rt-node"))
    assert read.status == status()
    assert read.spec == slo.NodeMetric.for_node("rt-node").spec


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        pytest.param(
            lambda s: s["nodeMetric"]["nodeUsage"]["resources"].__setitem__("cpu", "banana"),
            "status.nodeMetric.nodeUsage.resources.cpu",
            id="bad-quantity",
        ),
        pytest.param(
            lambda s: s["podsMetric"][0].pop("name"),
            "status.podsMetric[0].name",
            id="pod-without-name",
        ),
        pytest.param(
            lambda s: s.__setitem__("updateTime", "yesterday"), "status.updateTime", id="bad-time"
        ),
    ],
)
def test_server_rejects_status_violating_the_schema(
    kube: rest.Rest, mutate: Any, field: str
) -> None:
    """The structural schema is enforced by the server, naming the offending field."""
    name = f"bad-{abs(hash(field)) % 10**8}"
    created = kube.create(NODEMETRICS, slo.NodeMetric.for_node(name).to_api())
    body = status().to_api()
    mutate(body)
    created["status"] = body
    with pytest.raises(rest.ApiError) as caught:
        kube.replace(
            rest.object_path(
                "slo.koordinator.sh", "v1alpha1", "nodemetrics", name, subresource="status"
            ),
            created,
        )
    assert caught.value.status == 422
    assert field in caught.value.message
