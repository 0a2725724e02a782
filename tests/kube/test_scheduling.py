"""The pure node-fit pieces (kube.scheduling)."""

from __future__ import annotations

import pytest

from kube import constraints, quantity, scheduling
from kube.constraints import Taint, Toleration
from tests import builders

TAINT = Taint("dedicated", "db", "NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        pytest.param(Toleration("dedicated", "Equal", "db", "NoSchedule"), True, id="exact"),
        pytest.param(
            Toleration("dedicated", "Equal", "web", "NoSchedule"), False, id="value-mismatch"
        ),
        pytest.param(
            Toleration("dedicated", "Exists", "", "NoSchedule"), True, id="exists-any-value"
        ),
        pytest.param(Toleration("", "Exists"), True, id="empty-key-exists-tolerates-all"),
        pytest.param(
            Toleration("dedicated", "Equal", "db", ""), True, id="empty-effect-any-effect"
        ),
        pytest.param(
            Toleration("dedicated", "Equal", "db", "NoExecute"), False, id="effect-mismatch"
        ),
        pytest.param(Toleration("other", "Exists"), False, id="key-mismatch"),
        pytest.param(Toleration("dedicated", "Lt", "db"), False, id="unknown-operator"),
    ],
)
def test_toleration_semantics(toleration: Toleration, tolerated: bool) -> None:
    """ToleratesTaint: key, effect and operator rules of the Kubernetes API."""
    assert scheduling.tolerates([toleration], TAINT) is tolerated


def test_toleration_operator_defaults_to_equal() -> None:
    """An API toleration without operator means Equal."""
    assert Toleration.from_api({"key": "dedicated", "value": "db"}).operator == "Equal"
    assert scheduling.tolerates([Toleration.from_api({"key": "dedicated", "value": "db"})], TAINT)


def test_untolerated_taints_ignore_prefer_no_schedule_by_default() -> None:
    """Only NoSchedule and NoExecute block scheduling unless effects say otherwise."""
    node = builders.make_node("n", taints=["a:NoSchedule", "b:PreferNoSchedule", "c:NoExecute"])
    pod = builders.make_pod("p", tolerations=[{"key": "c", "operator": "Exists"}])
    assert [t.key for t in scheduling.untolerated_taints(pod, node)] == ["a"]
    assert [t.key for t in scheduling.untolerated_taints(pod, node, {"PreferNoSchedule"})] == ["b"]


@pytest.mark.parametrize(
    ("node_labels", "node_selector", "matches"),
    [
        pytest.param({"disk": "ssd", "zone": "z1"}, {"disk": "ssd"}, True, id="both-match"),
        pytest.param(
            {"disk": "hdd", "zone": "z1"}, {"disk": "ssd"}, False, id="node-selector-mismatch"
        ),
        pytest.param({"disk": "ssd", "zone": "z2"}, {"disk": "ssd"}, False, id="affinity-mismatch"),
        pytest.param({"zone": "z1"}, None, True, id="affinity-only"),
    ],
)
def test_node_selector_and_affinity(
    node_labels: dict[str, str], node_selector: dict[str, str] | None, matches: bool
) -> None:
    """spec.nodeSelector and required node affinity must both hold."""
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
                ]
            }
        }
    }
    pod = builders.make_pod("p", node_selector=node_selector, affinity=affinity)
    node = builders.make_node("n", labels=node_labels)
    assert scheduling.matches_node_selector_and_affinity(pod, node) is matches


@pytest.mark.parametrize(
    ("requests", "requested", "short"),
    [
        pytest.param({"cpu": 1000}, {"cpu": 3000, "pods": 5}, [], id="fits-exactly"),
        pytest.param({"cpu": 1001}, {"cpu": 3000}, ["cpu"], id="cpu-short"),
        pytest.param({"cpu": 0, "memory": 0}, {"cpu": 9000}, [], id="zero-request-ignored"),
        pytest.param({"nvidia.com/gpu": 1}, {}, ["nvidia.com/gpu"], id="resource-not-offered"),
        pytest.param({"cpu": 1}, {"pods": 110}, ["pods"], id="pod-count-full"),
        pytest.param({"cpu": 5000, "memory": 2**40}, {}, ["cpu", "memory"], id="several-sorted"),
    ],
)
def test_fits_requests(
    requests: dict[str, int], requested: dict[str, int], short: list[str]
) -> None:
    """NodeResourcesFit: positive requests against allocatable minus requested, plus pod count."""
    allocatable = builders.make_node("n").allocatable
    assert scheduling.fits_requests(requests, allocatable, requested) == short


def test_pod_fits_node_reports_every_reason() -> None:
    """All reasons against a node are returned, not only the first."""
    node = builders.make_node(
        "n", taints=["dedicated=db:NoSchedule"], unschedulable=True, ready=False
    )
    pod = builders.make_pod("p", cpu="3500m", node_selector={"disk": "ssd"})
    result = scheduling.pod_fits_node(pod, node, {"cpu": 1000, "pods": 3})
    assert not result and not result.ok
    assert result.reasons == (
        "node is unschedulable",
        "node is not ready",
        "untolerated taint dedicated=db:NoSchedule",
        "node selector or affinity mismatch",
        "insufficient cpu",
    )


def test_pod_fits_a_fitting_node() -> None:
    """A schedulable, ready, untainted node with room is a fit."""
    result = scheduling.pod_fits_node(builders.make_pod("p"), builders.make_node("n"), {})
    assert result.ok and result.reasons == () and bool(result)


def test_unschedulable_is_tolerable() -> None:
    """Tolerating node.kubernetes.io/unschedulable lets a pod onto a cordoned node."""
    toleration = {
        "key": constraints.UNSCHEDULABLE_TAINT_KEY,
        "operator": "Exists",
        "effect": "NoSchedule",
    }
    pod = builders.make_pod("p", tolerations=[toleration])
    assert scheduling.pod_fits_node(pod, builders.make_node("n", unschedulable=True), {}).ok


def test_requested_on_counts_pods_and_requests() -> None:
    """requested_on sums requests and counts pods, ready for pod_fits_node."""
    pods = [builders.make_pod("a", cpu="500m"), builders.make_pod("b", cpu="250m", memory=None)]
    assert scheduling.requested_on(pods) == {"cpu": 750, "memory": 128 * 2**20, quantity.PODS: 2}
    assert scheduling.requested_on([]) == {quantity.PODS: 0}


def test_scenario_d7_node_a_is_full() -> None:
    """SCENARIOS D7: seven 500m pods leave no room for another 500m pod on a 4-CPU node."""
    node = builders.make_node("a")
    pods = [builders.make_pod(f"p{i}", node="a", cpu="500m") for i in range(7)]
    newcomer = builders.make_pod("new", cpu="600m")
    assert scheduling.pod_fits_node(newcomer, node, scheduling.requested_on(pods)).reasons == (
        "insufficient cpu",
    )
