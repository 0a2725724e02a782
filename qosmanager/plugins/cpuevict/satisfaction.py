"""The maths of BE CPU eviction by satisfaction, from koordlet's `plugins/cpuevict`.

Best-effort pods are "satisfied" to the degree their real CPU limit (what CPU
suppression grants them) covers their requests: satisfaction = limit / request.
When BE pods use at least cpuEvictBEUsageThresholdPercent (90) of that limit
and satisfaction is at or below cpuEvictBESatisfactionLowerPercent, requests of
``request * (upper% - satisfaction)`` millicores are released by evicting BE
pods: lowest priority first, then the highest usage/request ratio.
All values are millicores.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kube import classify
from qosmanager import states as qstates
from qosmanager.plugins import _evictbe

LOWER_PERCENT_MAX = 60  # koordlet's beCPUSatisfactionLowPercentMax
UPPER_PERCENT_MAX = 100
DEFAULT_USAGE_THRESHOLD_PERCENT = 90
# Koordinator's batch resource: BE pods request it instead of cpu, in millicores.
BATCH_CPU = "kubernetes.io/batch-cpu"


def config_error(lower: int | None, upper: int | None) -> str | None:
    """Why the satisfaction bounds cannot be used, or None when they can."""
    if lower is None or upper is None:
        return "cpuEvictBESatisfactionLowerPercent and UpperPercent must both be set"
    if not 0 < lower <= LOWER_PERCENT_MAX:
        return f"cpuEvictBESatisfactionLowerPercent {lower} must be in (0, {LOWER_PERCENT_MAX}]"
    if not 0 < upper < UPPER_PERCENT_MAX:
        return f"cpuEvictBESatisfactionUpperPercent {upper} must be in (0, {UPPER_PERCENT_MAX})"
    if upper < lower:
        return f"cpuEvictBESatisfactionUpperPercent {upper} is below the lower bound {lower}"
    return None


def usage_high_enough(usage: float, limit: float, threshold_percent: int | None) -> bool:
    """BE pods use most of their limit (or the limit is under one core)."""
    if limit <= 0:
        return False
    if limit < 1000:
        return True
    threshold = DEFAULT_USAGE_THRESHOLD_PERCENT if threshold_percent is None else threshold_percent
    return usage / limit >= threshold / 100


def to_release(request: float, limit: float, lower_percent: int, upper_percent: int) -> int:
    """Millicores of BE requests to evict to lift satisfaction back to the upper bound.

    Integer arithmetic on whole millicores: request x (upper% - limit / request)
    is request x upper / 100 - limit, without float rounding at the bounds.
    """
    request_m, limit_m = round(request), round(limit)
    if request_m <= 0 or limit_m * 100 > request_m * lower_percent:
        return 0
    return max((request_m * upper_percent - limit_m * 100) // 100, 0)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A BE pod with its CPU request and latest usage (millicores)."""

    pod: qstates.PodMeta
    request: int
    usage: int

    @property
    def usage_ratio(self) -> float:
        return self.usage / self.request if self.request > 0 else 0.0


def batch_request(pod: qstates.PodMeta) -> int:
    """A BE pod's CPU request in millicores: `kubernetes.io/batch-cpu`, else cpu."""
    return pod.requests.get(BATCH_CPU, 0) or pod.requests.cpu


def candidates(pods: Iterable[qstates.PodMeta], usage_by_uid: dict[str, float]) -> list[Candidate]:
    """BE pods in eviction order: priority ascending, then usage/request descending."""
    found = [
        Candidate(p, batch_request(p), round(usage_by_uid.get(p.uid, 0.0) * 1000))
        for p in pods
        if p.qos is classify.KoordQOS.BE
    ]
    return sorted(found, key=lambda c: (c.pod.priority, -c.usage_ratio, c.pod.key))


def select(ordered: Sequence[Candidate], need: int) -> list[Candidate]:
    """The prefix of `ordered` whose requests cover `need`."""
    return _evictbe.covering_prefix(ordered, need, lambda c: c.request)
