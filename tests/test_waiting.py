"""tests/waiting.py: `eventually` returns the first truthy value, or fails naming what it waited for."""

from __future__ import annotations

import pytest

from tests.waiting import eventually


class FakeTime:
    """A clock that moves only when the waiter sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_returns_the_first_truthy_value() -> None:
    """Falsy answers are polled past, every `interval`; the first truthy one is returned."""
    answers = iter([None, [], 0, ["pod"]])
    fake = FakeTime()
    got = eventually(
        lambda: next(answers), "a pod", interval=0.5, clock=fake.clock, sleep=fake.sleep
    )
    assert got == ["pod"]
    assert fake.slept == [0.5, 0.5, 0.5]


def test_fails_after_the_timeout_naming_what() -> None:
    """A check that never holds fails once the deadline has passed, with the timeout and `what`."""
    fake = FakeTime()
    with pytest.raises(AssertionError, match=r"timed out after 2s waiting for the leader"):
        eventually(lambda: False, "the leader", 2, interval=0.5, clock=fake.clock, sleep=fake.sleep)
    assert 2.0 < sum(fake.slept) <= 2.5
