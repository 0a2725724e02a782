"""Builders shared by the metric cache tests (a hand-driven clock, samples)."""

from __future__ import annotations

from collections.abc import Callable

from metriccache import MetricCache, MetricKind, Sample, kinds

T0 = 1_700_000_000.0

# The `open_cache` fixture: opens a cache on tmp_path with the fake clock.
OpenCache = Callable[..., MetricCache]


class FakeClock:
    """A clock tests move by hand; starts at T0."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def pod(uid: str, t: float, value: float, kind: MetricKind = kinds.POD_CPU_USAGE) -> Sample:
    """A pod-scoped sample."""
    return Sample(kind, {"pod_uid": uid}, t, value)


def container(
    uid: str, cid: str, t: float, value: float, kind: MetricKind = kinds.CONTAINER_CPU_USAGE
) -> Sample:
    """A container-scoped sample."""
    return Sample(kind, {"pod_uid": uid, "container_id": cid}, t, value)


def node(t: float, value: float, kind: MetricKind = kinds.NODE_CPU_USAGE) -> Sample:
    """A node-level sample."""
    return Sample(kind, {}, t, value)
