"""LowNodeLoad eviction order: Koordinator's comparators, fit to the excess, a total order."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Mapping
from datetime import timedelta
from fractions import Fraction
from typing import Any

import pytest

from descheduler.plugins.lownodeload import order
from kube import objects
from kube.classify import KoordQOS, KubeQOS
from tests.builders import T0, make_pod

CPU = {"cpu": 1}


def _ranked(
    pods: Mapping[str, dict[str, Any]],
    used: Mapping[str, int],
    excess: Mapping[str, int],
    weights: Mapping[str, int] = CPU,
) -> list[str]:
    """Names in eviction order; `used` is each pod's CPU usage."""
    built = [make_pod(name, node="A", **overrides) for name, overrides in pods.items()]

    def usage_of(pod: objects.Pod) -> Mapping[str, int]:
        return {"cpu": used.get(pod.name, 0)}

    return [p.name for p in order.rank(built, usage_of, excess, weights)]


def test_d1_smallest_covering_pod_first() -> None:
    """D1: excess 900m → 1000, then 1200, then the rest from the biggest down."""
    used = {"p1200": 1200, "p1000": 1000, "p600": 600, "p400": 400, "p300": 300, "p200": 200}
    ranked = _ranked({name: {} for name in used}, used, {"cpu": 900})
    assert ranked == ["p1000", "p1200", "p600", "p400", "p300", "p200"]


def test_exact_cover_beats_everything() -> None:
    """A pod using exactly the excess scores highest; one using nothing comes last."""
    used = {"exact": 900, "over": 901, "under": 899, "idle": 0}
    assert _ranked({name: {} for name in used}, used, {"cpu": 900}) == [
        "exact",
        "over",
        "under",
        "idle",
    ]


SAME_CLASSES = {"koordinator.sh/priority-class": "koord-prod", "koordinator.sh/qosClass": "LS"}


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(
            {"labels": {"koordinator.sh/priority-class": "koord-free"}},
            {"labels": {"koordinator.sh/priority-class": "koord-batch"}},
            id="free-before-batch",
        ),
        pytest.param({"qos": KoordQOS.BE}, {}, id="batch-by-qos-before-prod-by-qos"),
        pytest.param({"priority": 7500}, {}, id="mid-before-prod"),
        pytest.param({"priority": 9100}, {"priority": 9200}, id="lower-priority-first"),
        pytest.param(
            {"qos": KubeQOS.BEST_EFFORT, "labels": SAME_CLASSES},
            {"qos": KubeQOS.BURSTABLE, "labels": SAME_CLASSES},
            id="kube-besteffort-before-burstable",
        ),
        pytest.param({"qos": KubeQOS.BURSTABLE}, {"qos": KubeQOS.GUARANTEED}, id="guaranteed-last"),
        pytest.param({"qos": KoordQOS.LSR}, {"qos": KoordQOS.LSE}, id="lsr-before-lse"),
        pytest.param(
            {"annotations": {order.ANNOTATION_POD_DELETION_COST: "-5"}},
            {},
            id="lower-deletion-cost-first",
        ),
        pytest.param(
            {},
            {"annotations": {order.ANNOTATION_EVICTION_COST: "10"}},
            id="lower-eviction-cost-first",
        ),
        pytest.param(
            {"annotations": {order.ANNOTATION_EVICTION_COST: "100"}},
            {"annotations": {order.ANNOTATION_POD_DELETION_COST: "1"}},
            id="deletion-cost-before-eviction-cost",
        ),
    ],
)
def test_comparators_before_fit(first: dict[str, Any], second: dict[str, Any]) -> None:
    """Each comparator decides when every earlier one ties; fit never outranks them."""
    used = {"second": 900, "first": 100}  # fit alone would put "second" first
    assert _ranked({"second": second, "first": first}, used, {"cpu": 900}) == ["first", "second"]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param({"created": T0 + timedelta(hours=1)}, {"created": T0}, id="newest-first"),
        pytest.param({"created": T0}, {"created": None}, id="no-creation-time-last"),
    ],
)
def test_creation_time_after_fit(first: dict[str, Any], second: dict[str, Any]) -> None:
    """Among equally fitting pods the newest goes first (Koordinator's PodCreationTimestamp)."""
    used = {"first": 500, "second": 500}
    assert _ranked({"second": second, "first": first}, used, {"cpu": 900}) == ["first", "second"]


def test_fit_outranks_creation_time() -> None:
    """With every class equal, fit to the excess comes before age."""
    pods = {"old-exact": {"created": T0}, "new-idle": {"created": T0 + timedelta(hours=1)}}
    assert _ranked(pods, {"old-exact": 900}, {"cpu": 900}) == ["old-exact", "new-idle"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("42", 42, id="plain"),
        pytest.param("-7", -7, id="negative"),
        pytest.param("0", 0, id="zero"),
        pytest.param("+5", 0, id="plus-sign-rejected"),
        pytest.param("007", 0, id="leading-zeros-rejected"),
        pytest.param("2147483648", 0, id="beyond-int32"),
        pytest.param("ten", 0, id="not-a-number"),
        pytest.param("", 0, id="empty"),
    ],
)
def test_cost_annotation_parsing(text: str, expected: int) -> None:
    """Costs parse like Kubernetes' GetDeletionCostFromPodAnnotations."""
    pod = make_pod("p", annotations={order.ANNOTATION_EVICTION_COST: text})
    assert order.cost(pod, order.ANNOTATION_EVICTION_COST) == expected


def test_order_is_total_and_input_independent() -> None:
    """Pods equal on every comparator are ordered by namespace, then name, in any input order."""
    pods = [
        make_pod(name, namespace=ns, node="A")
        for ns, name in itertools.product(("b", "a"), ("y", "x", "z"))
    ]

    def usage_of(pod: objects.Pod) -> Mapping[str, int]:
        return {"cpu": 500}

    expected = ["a/x", "a/y", "a/z", "b/x", "b/y", "b/z"]
    shuffler = random.Random(7)
    for _ in range(5):
        shuffler.shuffle(pods)
        ranked = order.rank(pods, usage_of, {"cpu": 900}, CPU)
        assert [p.key for p in ranked] == expected


def test_multi_resource_fit_is_the_weighted_mean() -> None:
    """With cpu and memory over, the per-resource scores are averaged by weight."""
    excess = {"cpu": 1000, "memory": 1000}
    assert order.fit_score({"cpu": 1000, "memory": 500}, excess, {"cpu": 1, "memory": 1}) == (
        Fraction(2 + Fraction(1, 2), 2)
    )
    assert order.fit_score({"cpu": 1000, "memory": 500}, excess, {"cpu": 3, "memory": 1}) == (
        Fraction(3 * 2 + Fraction(1, 2), 4)
    )
    # only the resources over count: memory is not in the excess here
    assert order.fit_score(
        {"cpu": 2000, "memory": 10**9}, {"cpu": 1000}, {"cpu": 1, "memory": 1}
    ) == (Fraction(3, 2))


def test_multi_resource_ranking_prefers_the_heavier_weight() -> None:
    """A pod fitting the heavily weighted resource ranks first."""
    pods = [make_pod("cpu-fit", node="A"), make_pod("mem-fit", node="A")]
    used = {
        "cpu-fit": {"cpu": 1000, "memory": 100},
        "mem-fit": {"cpu": 100, "memory": 1000},
    }
    excess = {"cpu": 1000, "memory": 1000}
    ranked = order.rank(pods, lambda p: used[p.name], excess, {"cpu": 5, "memory": 1})
    assert [p.name for p in ranked] == ["cpu-fit", "mem-fit"]
    ranked = order.rank(pods, lambda p: used[p.name], excess, {"cpu": 1, "memory": 5})
    assert [p.name for p in ranked] == ["mem-fit", "cpu-fit"]


def _random_pods(rng: random.Random, count: int) -> list[objects.Pod]:
    """Pods varied on every comparator, some of them equal on all but the name."""
    pods = []
    for i in range(count):
        kw: dict[str, Any] = {"node": "A", "created": T0 - timedelta(minutes=rng.choice((0, 5)))}
        if rng.random() < 0.3:
            kw["priority"] = rng.choice((0, 10))
        if rng.random() < 0.3:
            kw["annotations"] = {order.ANNOTATION_EVICTION_COST: rng.choice(("-5", "3", "x"))}
        if rng.random() < 0.2:
            kw["qos"] = rng.choice((KoordQOS.BE, KubeQOS.GUARANTEED))
        pods.append(make_pod(f"p{i:02d}", **kw))
    return pods


def _reader(used: Mapping[str, Mapping[str, int]]) -> Callable[[objects.Pod], Mapping[str, int]]:
    """A `usage_of` reading each pod's usage by name."""
    return lambda pod: used[pod.name]


@pytest.mark.parametrize("resources_over", [0, 1, 2, 3], ids=lambda n: f"{n}-over")
def test_rank_is_exactly_the_eviction_key_order(resources_over: int) -> None:
    """`rank` (and the Ranker behind it) orders as sorting by `eviction_key` does, ties included."""
    rng = random.Random(resources_over)
    names = ("cpu", "memory", "ephemeral-storage")
    for _ in range(40):
        pods = _random_pods(rng, 12)
        choices = (0, 100, 250, 500, 501, 1000, 10**15, 10**15 + 1)  # equal scores happen
        used = {p.name: {n: rng.choice(choices) for n in names} for p in pods}
        excess = {n: rng.choice((250, 500, 10**15)) for n in names[:resources_over]}
        weights = {n: rng.choice((1, 2, 5)) for n in names}
        usage_of = _reader(used)
        expected = sorted(pods, key=lambda p: order.eviction_key(p, usage_of(p), excess, weights))
        assert order.rank(pods, usage_of, excess, weights) == expected


def test_scores_a_float_cannot_tell_apart_are_ordered_exactly() -> None:
    """Scores 1e-17 apart round to the same float; the exact values still decide."""
    excess = {"cpu": 10**17, "memory": 1000}
    used = {
        "a": {"cpu": 10**17 - 2, "memory": 500},
        "b": {"cpu": 10**17 - 1, "memory": 500},  # covers a little more of the cpu excess
        "c": {"cpu": 10**17 - 3, "memory": 500},
    }
    pods = [make_pod(name, node="A") for name in used]
    scores = {n: order.fit_score(u, excess, CPU | {"memory": 1}) for n, u in used.items()}
    assert len({float(s) for s in scores.values()}) == 1 and len(set(scores.values())) == 3
    ranked = order.rank(pods, lambda p: used[p.name], excess, {"cpu": 1, "memory": 1})
    assert [p.name for p in ranked] == ["b", "a", "c"]


def test_ranker_ranks_again_for_a_new_excess() -> None:
    """One Ranker, asked again with fewer pods and a smaller excess, answers as `rank` would."""
    used = {"p1200": 1200, "p1000": 1000, "p600": 600, "p400": 400, "p300": 300}
    pods = [make_pod(name, node="A") for name in used]

    def usage_of(pod: objects.Pod) -> Mapping[str, int]:
        return {"cpu": used[pod.name]}

    ranker = order.Ranker(pods, usage_of, CPU)
    first = ranker.rank(pods, {"cpu": 900})
    assert [p.name for p in first] == ["p1000", "p1200", "p600", "p400", "p300"]
    rest = first[1:]
    again = ranker.rank(rest, {"cpu": 350})
    assert again == order.rank(rest, usage_of, {"cpu": 350}, CPU)
    assert [p.name for p in again] == ["p400", "p600", "p1200", "p300"]
