"""testbed.localcluster.wait_drained: waits on progress, not on one fixed deadline."""

from __future__ import annotations

import pytest

from testbed import localcluster


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_slow_drain_that_keeps_progressing_outlasts_the_stall_timeout() -> None:
    """10 pods going one every 50 s take 500 s against a 60 s stall timeout, and pass."""
    clock = _Clock()
    counts = iter([10, *[n for n in range(10, -1, -1) for _ in range(50)]])
    localcluster.wait_drained(
        lambda: next(counts), "pods", stall_timeout=60, clock=clock.time, sleep=clock.sleep
    )
    assert clock.now >= 500


def test_a_count_that_stops_falling_is_reported_stuck() -> None:
    """3 pods that never go fail after the stall timeout, naming what and how many."""
    clock = _Clock()
    with pytest.raises(TimeoutError, match=r"the pods: 3 still there, no progress in 60s"):
        localcluster.wait_drained(
            lambda: 3, "the pods", stall_timeout=60, clock=clock.time, sleep=clock.sleep
        )
    assert clock.now <= 62
