"""The cycle snapshot: indexes, projected requests and usage, PDB budgets, sources."""

from __future__ import annotations

import pytest

from descheduler import framework
from descheduler.framework import DisruptionBudget, Snapshot
from kube import objects, selectors
from kube.quantity import Resources
from tests import builders
from tests.descheduler import fakes

pod = builders.make_pod


def snapshot(
    *pods: objects.Pod,
    nodes: list[objects.Node] | None = None,
    pdbs: tuple[DisruptionBudget, ...] = (),
    selector: str | None = None,
) -> Snapshot:
    source = framework.StaticSource(
        nodes=fakes.nodes("n2", "n1", "n3") if nodes is None else nodes, pods=pods, pdbs=pdbs
    )
    chosen = selectors.parse_selector(selector) if selector else None
    return Snapshot(source.state(), taken_at=fakes.NOW, node_selector=chosen)


def budget(allowed: int, *, app: str = "web", generation: int = 1) -> DisruptionBudget:
    return DisruptionBudget.from_api(
        {
            "metadata": {"name": app, "namespace": "default", "generation": generation},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
            "status": {"observedGeneration": 1, "disruptionsAllowed": allowed},
        }
    )


def test_ready_selected_nodes_sorted_and_every_node_reachable() -> None:
    """`nodes` holds Ready nodes matching the nodeSelector, by name; `node()` finds any."""
    nodes = [
        builders.make_node("b", labels={"pool": "x"}),
        builders.make_node("a", labels={"pool": "x"}),
        builders.make_node("c"),
        builders.make_node("d", labels={"pool": "x"}, ready=False),
    ]
    snap = snapshot(nodes=nodes, selector="pool=x")
    assert snap.node_names == ("a", "b")
    assert snap.node("d") is not None and snap.node("zz") is None


def test_pods_are_indexed_by_node_and_owner_in_a_total_order() -> None:
    """pods_on and pods_of_owner list namespace/name order; evicted pods drop out."""
    b, a, c = (
        pod("b", node="n1", owner_name="rs"),
        pod("a", node="n1", owner_name="rs"),
        pod("c", node="n2"),
    )
    snap = snapshot(b, a, c)
    assert [p.name for p in snap.pods_on("n1")] == ["a", "b"]
    owner = a.controller_ref
    assert owner is not None
    assert [p.name for p in snap.pods_of_owner(owner.uid)] == ["a", "b"]
    snap.record_eviction(a)
    assert [p.name for p in snap.pods_on("n1")] == ["b"]
    assert [p.name for p in snap.pods_of_owner(owner.uid)] == ["b"]
    assert [p.name for p in snap.pods()] == ["b", "c"]
    assert snap.evicted == (a,)


def test_namespace_pods_on_is_pods_on_filtered() -> None:
    """One namespace's pods of a node, in pods_on order; evicted pods drop out."""
    pods = [
        pod(name, namespace=ns, node=node)
        for node in ("n1", "n2")
        for ns in ("b", "a", "c", "a-b")
        for name in ("y", "x")
    ]
    snap = snapshot(*pods)
    for node in ("n1", "n2", "n3"):
        for ns in ("a", "a-b", "b", "c", "d", ""):
            expected = [p for p in snap.pods_on(node) if p.namespace == ns]
            assert list(snap.namespace_pods_on(node, ns)) == expected
    assert [p.name for p in snap.namespace_pods_on("n1", "a")] == ["x", "y"]
    snap.record_eviction(pods[1])  # b/x on n1
    assert [p.key for p in snap.namespace_pods_on("n1", "b")] == ["b/y"]


def test_eviction_moves_requests_and_usage_between_nodes() -> None:
    """record_eviction projects requests (with the pods count) and plugin-set usage."""
    mover = pod("m", node="n1", cpu="500m", memory="1Gi")
    stay = pod("s", node="n1", cpu="200m", memory="1Gi")
    done = pod("d", node="n1", cpu="900m", phase="Succeeded")
    snap = snapshot(mover, stay, done)
    assert snap.requested("n1")["cpu"] == 700  # terminal pods hold nothing
    snap.set_usage("n1", Resources({"cpu": 3000}))
    snap.set_usage("n2", Resources({"cpu": 400}))
    snap.record_eviction(mover, destination="n2", usage=Resources({"cpu": 1000}))
    assert snap.requested("n1") == {"cpu": 200, "memory": 1 << 30, "pods": 1}
    assert snap.requested("n2") == {"cpu": 500, "memory": 1 << 30, "pods": 1}
    assert (snap.usage("n1"), snap.usage("n2")) == ({"cpu": 2000}, {"cpu": 1400})
    assert snap.arrivals("n2") == (mover,)
    by_node = {p.node: p for p in snap.projections()}
    assert sorted(by_node) == ["n1", "n2"]
    assert by_node["n1"].usage_before == {"cpu": 3000}
    assert by_node["n1"].usage_after == {"cpu": 2000}
    assert by_node["n2"].requests_before == {"pods": 0}
    with pytest.raises(ValueError, match="already recorded"):
        snap.record_eviction(mover)


def test_restricted_view_shares_the_projection() -> None:
    """A profile's view narrows nodes but sees the same evictions."""
    a = pod("a", node="n1")
    snap = snapshot(
        a, nodes=[builders.make_node("n1", labels={"p": "1"}), builders.make_node("n2")]
    )
    view = snap.restricted(selectors.parse_selector("p=1"))
    assert view.node_names == ("n1",) and snap.node_names == ("n1", "n2")
    view.record_eviction(a)
    assert snap.pods_on("n1") == () and snap.is_evicted(a)
    assert snap.restricted(None) is snap


def test_pdb_budget_shrinks_with_healthy_evictions_only() -> None:
    """disruptions_left counts down for each Ready pod a budget loses this cycle."""
    healthy = pod("h", labels={"app": "web"})
    unready = pod("u", labels={"app": "web"}, ready=False)
    other = pod("o", labels={"app": "db"})
    pdb = budget(2)
    snap = snapshot(healthy, unready, other, pdbs=(pdb,))
    assert snap.pdbs_covering(healthy) == (pdb,) and snap.pdbs_covering(other) == ()
    snap.record_eviction(unready)
    assert snap.disruptions_left(pdb) == 2
    snap.record_eviction(healthy)
    assert snap.disruptions_left(pdb) == 1


def test_pdb_view_reads_policy_v1() -> None:
    """A missing selector selects nothing; an empty one the whole namespace; status is kept."""
    raw = {
        "metadata": {"name": "b", "namespace": "ns", "generation": 3},
        "spec": {"maxUnavailable": 1},
        "status": {
            "observedGeneration": 2,
            "disruptionsAllowed": 1,
            "currentHealthy": 3,
            "desiredHealthy": 2,
        },
    }
    none = DisruptionBudget.from_api(raw)
    everything = DisruptionBudget.from_api({**raw, "spec": {"selector": {}}})
    in_ns = pod("x", namespace="ns")
    assert not none.covers(in_ns) and everything.covers(in_ns)
    assert not everything.covers(pod("y", namespace="other"))
    assert (none.disruptions_allowed, none.current_healthy, none.desired_healthy) == (1, 3, 2)
    assert not none.computed  # observedGeneration 2 < generation 3


def test_static_source_from_a_list_file() -> None:
    """`simulate` reads a kind: List; every kind the snapshot needs is understood."""
    items = [
        builders.make_node_dict("n1"),
        builders.make_node_dict("n2"),
        builders.make_pod_dict("p", node="n1"),
        {
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "b", "namespace": "default"},
            "spec": {},
        },
        {**builders.make_nodemetric_dict("n1", node_cpu="1"), "kind": "NodeMetric"},
        {"kind": "Namespace", "metadata": {"name": "default", "labels": {"team": "a"}}},
        {"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
        {"kind": "ConfigMap", "metadata": {"name": "ignored"}},
    ]
    snap = Snapshot(framework.StaticSource.from_objects(items).state(), taken_at=fakes.NOW)
    assert snap.node_names == ("n1", "n2")
    assert [p.name for p in snap.pods_on("n1")] == ["p"]
    assert [b.name for b in snap.pdbs] == ["b"]
    metric = snap.node_metric("n1")
    assert metric is not None and metric.status.node_metric.node_usage.cpu == 1000
    assert snap.namespace_labels("default") == {"team": "a"}
    assert snap.priority_class_value("high") == 1000
    assert snap.priority_class_value("system-node-critical") == 2_000_001_000


def test_static_source_replace_changes_the_next_state() -> None:
    """Tests swap parts of a StaticSource between cycles."""
    source = framework.StaticSource(nodes=fakes.nodes("n1"))
    source.replace(pods=[pod("p")], namespaces={"default": {}})
    state = source.state()
    assert [p.name for p in state.pods] == ["p"] and [n.name for n in state.nodes] == ["n1"]
    with pytest.raises(TypeError):
        source.replace(bogus=[])
