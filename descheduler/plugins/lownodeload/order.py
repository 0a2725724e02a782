"""The order in which LowNodeLoad tries a source's pods: a total order by key tuple.

`plan` ranks a source's candidates before each attempt (with a `Ranker`,
which orders as `rank` does and keeps what does not change between attempts),
against the source's current excess (its usage above the high marks), so
after each eviction the next pick fits what is left. Koordinator ranks once per source
(`sortPodsOnOneOverloadedNode`, `pkg/descheduler/utils/sorter/pod.go`); its
comparators, in order, are kept:

1. Koordinator priority class (`usage.priority_class`, defaulted from QoS):
   free, batch, mid, prod, then pods with none.
2. `spec.priority`, lower first (absent reads 0).
3. Kubernetes QoS: BestEffort, Burstable, Guaranteed.
4. Koordinator QoS: BE, LS, LSR, then LSE and SYSTEM (equal), then none.
5. `controller.kubernetes.io/pod-deletion-cost`, lower first.
6. `scheduling.koordinator.sh/eviction-cost`, lower first.
   Both costs are int32 text; a missing or malformed value reads 0.
7. Fit to the excess, best first (`fit_score`).
8. Creation time, newest first (a pod without one goes last).
9. namespace, name, uid: ties end here, so the order is total and the same
   every run (Go's `sort.Sort` leaves them unspecified).

`fit_score` is Koordinator's `mostRequestedScorePod` averaged over the
resources the source is over, weighted by `resourceWeights`: per resource,
with r = pod usage / excess, the score is r when r < 1 and 1 + 1/r when
r >= 1. Higher ranks first, so with one resource: the smallest pod that covers
the excess first (r = 1 scores 2), then larger covering pods in ascending
usage, then pods that do not cover it in descending usage (biggest relief
first), and pods using nothing last. With several resources over, the weighted
mean of those per-resource scores decides. Scores are exact fractions, so equal
inputs tie exactly and fall through to the next key.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from typing import Final

from descheduler.plugins.lownodeload import usage
from kube import objects
from kube.classify import KoordQOS, KubeQOS, PriorityClass

__all__ = [
    "ANNOTATION_EVICTION_COST",
    "ANNOTATION_POD_DELETION_COST",
    "EvictionKey",
    "Ranker",
    "cost",
    "eviction_key",
    "fit_score",
    "rank",
]

ANNOTATION_POD_DELETION_COST: Final = "controller.kubernetes.io/pod-deletion-cost"
ANNOTATION_EVICTION_COST: Final = "scheduling.koordinator.sh/eviction-cost"

_CLASS_RANK: Final = {
    PriorityClass.FREE: 1,
    PriorityClass.BATCH: 2,
    PriorityClass.MID: 3,
    PriorityClass.PROD: 4,
    PriorityClass.NONE: 5,
}
_KUBE_QOS_RANK: Final = {KubeQOS.BEST_EFFORT: 1, KubeQOS.BURSTABLE: 2, KubeQOS.GUARANTEED: 3}
_KOORD_QOS_RANK: Final = {
    KoordQOS.BE: 1,
    KoordQOS.LS: 2,
    KoordQOS.LSR: 3,
    KoordQOS.LSE: 4,
    KoordQOS.SYSTEM: 4,
    KoordQOS.NONE: 5,
}
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

EvictionKey = tuple[int, int, int, int, int, int, Fraction, float, str, str, str]


def cost(pod: objects.Pod, annotation: str) -> int:
    """An int32 cost annotation, 0 when absent or malformed.

    Like Kubernetes' `GetDeletionCostFromPodAnnotations` and Koordinator's
    `GetEvictionCost`: no leading "+", no leading zeros ("0" itself is fine).
    """
    text = pod.annotations.get(annotation)
    if not text:
        return 0
    digits = text[1:] if text.startswith("-") else text
    if not digits.isdecimal() or not digits.isascii() or (digits[0] == "0" and digits != "0"):
        return 0
    value = int(text)
    return value if _INT32_MIN <= value <= _INT32_MAX else 0


def fit_score(
    used: Mapping[str, int], excess: Mapping[str, int], weights: Mapping[str, int]
) -> Fraction:
    """How well a pod's usage fits the excess (higher is better); see the module docstring."""
    # Integer numerator/denominator, one Fraction at the end: the same value, a
    # fraction of the cost (this runs for every candidate after every eviction).
    num, den, total_weight = 0, 1, 0
    for name, over in excess.items():
        weight = weights.get(name, 0)
        if weight <= 0 or over <= 0:
            continue
        total_weight += weight
        amount = used.get(name, 0)
        top, bottom = (amount, over) if amount < over else (amount + over, amount)
        num, den = num * bottom + weight * top * den, den * bottom
    return Fraction(num, den * total_weight) if total_weight else Fraction(0)


def eviction_key(
    pod: objects.Pod,
    used: Mapping[str, int],
    excess: Mapping[str, int],
    weights: Mapping[str, int],
) -> EvictionKey:
    """The pod's sort key: smaller keys are tried first."""
    return (*_head(pod), -fit_score(used, excess, weights), *_tail(pod))


def _head(pod: objects.Pod) -> tuple[int, int, int, int, int, int]:
    """The part of the sort key before the fit score: class, priority, QoS, costs."""
    return (
        _CLASS_RANK[usage.priority_class(pod)],
        pod.priority or 0,
        _KUBE_QOS_RANK[pod.kube_qos],
        _KOORD_QOS_RANK[pod.koord_qos],
        cost(pod, ANNOTATION_POD_DELETION_COST),
        cost(pod, ANNOTATION_EVICTION_COST),
    )


def _tail(pod: objects.Pod) -> _Tail:
    """The part of the sort key after the fit score: the youngest first, then by name."""
    created = pod.creation_timestamp
    return (math.inf if created is None else -created.timestamp(), pod.namespace, pod.name, pod.uid)


def rank(
    pods: Iterable[objects.Pod],
    usage_of: Callable[[objects.Pod], Mapping[str, int]],
    excess: Mapping[str, int],
    weights: Mapping[str, int],
) -> list[objects.Pod]:
    """The pods in eviction order for this excess: `eviction_key` order."""
    pods = list(pods)
    return Ranker(pods, usage_of, weights).rank(pods, excess)


class _Exact:
    """The exact value -num/den (den > 0), compared by integer cross-multiplication."""

    __slots__ = ("den", "num")

    def __init__(self, num: int, den: int) -> None:
        self.num = -num
        self.den = den

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Exact):
            return NotImplemented
        return self.num * other.den == other.num * self.den

    def __lt__(self, other: _Exact) -> bool:
        return self.num * other.den < other.num * self.den


class Ranker:
    """`rank` for one source's candidates, which `plan` ranks again after each eviction.

    The keys that do not depend on the excess (classes, priority, costs, age,
    names) and each pod's usage are computed once per pod, not once per ranking.
    The fit term orders exactly as `-fit_score` does, without Fractions:

    - one weighted resource over (the usual case): covering pods (usage >=
      excess) first, smallest first, then the others largest first;
    - several: the correctly rounded float of the score (Python's int / int),
      then the exact value. Rounding is monotonic, so two floats that differ
      are in the order of the exact values; only equal floats (rare: mostly
      equal scores) compare the exact values, by cross-multiplication.
    """

    def __init__(
        self,
        pods: Iterable[objects.Pod],
        usage_of: Callable[[objects.Pod], Mapping[str, int]],
        weights: Mapping[str, int],
    ) -> None:
        self._weights = weights
        heads: dict[tuple[int, ...], tuple[int, ...]] = {}
        # id(pod) -> (pod, fixed head key, usage, fixed tail key); the entry holds
        # the pod, so its id cannot be reused while the Ranker lives.
        self._fixed: dict[int, tuple[objects.Pod, tuple[int, ...], Mapping[str, int], _Tail]] = {}
        for pod in pods:
            head: tuple[int, ...] = _head(pod)
            head = heads.setdefault(head, head)  # one object per value: tuple compares stop early
            self._fixed[id(pod)] = (pod, head, usage_of(pod), _tail(pod))

    def rank(self, pods: Iterable[objects.Pod], excess: Mapping[str, int]) -> list[objects.Pod]:
        """These pods (each given to the constructor) in eviction order for this excess."""
        weights = self._weights
        judged = [(n, o, weights.get(n, 0)) for n, o in excess.items()]
        judged = [(n, o, w) for n, o, w in judged if w > 0 and o > 0]
        fixed = self._fixed
        pods = list(pods)
        keys: list[tuple[tuple[int, ...], object, _Tail, int]] = []
        if not judged:  # every fit_score is 0: the term orders nothing
            for index, pod in enumerate(pods):
                _, head, _, tail = fixed[id(pod)]
                keys.append((head, 0, tail, index))
        elif len(judged) == 1:
            name, over, _ = judged[0]
            for index, pod in enumerate(pods):
                _, head, used_by, tail = fixed[id(pod)]
                used = used_by.get(name, 0)
                fit = (0, used) if used >= over else (1, -used)
                keys.append((head, fit, tail, index))
        else:
            total_weight = sum(w for _, _, w in judged)
            scores = []
            for pod in pods:
                used_by = fixed[id(pod)][2]
                num, den = 0, 1  # as fit_score computes them
                for name, over, weight in judged:
                    amount = used_by.get(name, 0)
                    if amount < over:
                        num, den = num * over + weight * amount * den, den * over
                    else:
                        num, den = num * amount + weight * (amount + over) * den, den * amount
                scores.append((num, den * total_weight))
            floats = [-(num / den) for num, den in scores]
            fits: list[object] = list(floats)
            if len(set(floats)) < len(floats):  # equal floats: let the exact values decide
                fits = [(f, _Exact(*score)) for f, score in zip(floats, scores, strict=True)]
            for index, (pod, term) in enumerate(zip(pods, fits, strict=True)):
                _, head, _, tail = fixed[id(pod)]
                keys.append((head, term, tail, index))
        # The index keeps equal keys in input order, as a stable sort does.
        keys.sort()
        return [pods[key[3]] for key in keys]


_Tail = tuple[float, str, str, str]
