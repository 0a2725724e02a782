"""kube.backoff: policies, one retry sequence, and the work queue's rate limiters."""

from __future__ import annotations

import pytest

from kube import backoff


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_policy_doubles_to_its_cap_without_overflow() -> None:
    """Delays double from initial up to cap, even after thousands of failures."""
    policy = backoff.Policy(initial=0.5, cap=30.0)
    assert [policy.base(n) for n in range(1, 9)] == [0.5, 1, 2, 4, 8, 16, 30, 30]
    assert policy.base(5000) == 30.0
    assert policy.base(0) == 0.0


@pytest.mark.parametrize(
    ("rand", "expected"),
    [
        pytest.param(1.0, 8.0, id="rand-1-full-delay"),
        pytest.param(0.0, 4.0, id="rand-0-takes-the-jitter-off"),
        pytest.param(0.5, 6.0, id="between"),
    ],
)
def test_jitter_takes_up_to_its_fraction_off(rand: float, expected: float) -> None:
    """A jitter of 0.5 gives between half and all of the delay."""
    policy = backoff.Policy(initial=1.0, cap=60.0, jitter=0.5)
    assert policy.delay(4, lambda: rand) == expected


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"initial": 0.0, "cap": 1.0}, id="zero-initial"),
        pytest.param({"initial": 2.0, "cap": 1.0}, id="initial-over-cap"),
        pytest.param({"initial": 1.0, "cap": 2.0, "jitter": 1.5}, id="jitter-over-1"),
        pytest.param({"initial": 1.0, "cap": 2.0, "factor": 0.5}, id="shrinking"),
    ],
)
def test_policy_rejects_nonsense(kwargs: dict[str, float]) -> None:
    """A policy that could not back off is refused at construction."""
    with pytest.raises(ValueError, match="initial"):
        backoff.Policy(**kwargs)


def test_backoff_sequence_resets() -> None:
    """One sequence grows per delay() and starts over on reset()."""
    retry = backoff.Backoff(backoff.Policy(initial=1.0, cap=4.0))
    assert [retry.delay() for _ in range(4)] == [1.0, 2.0, 4.0, 4.0]
    retry.reset()
    assert retry.delay() == 1.0
    assert retry.cap == 4.0


def test_item_exponential_counts_per_key_and_forgets() -> None:
    """Each key backs off on its own; forget starts one key over; keep_only prunes."""
    limiter = backoff.ItemExponential(backoff.Policy(initial=0.5, cap=60.0))
    assert [limiter.when("a") for _ in range(3)] == [0.5, 1.0, 2.0]
    assert limiter.when("b") == 0.5
    assert limiter.failures("a") == 3
    limiter.forget("a")
    assert limiter.failures("a") == 0
    assert limiter.when("a") == 0.5
    limiter.keep_only({"b"})
    assert len(limiter) == 1 and limiter.failures("a") == 0


def test_token_bucket_spends_its_burst_then_paces() -> None:
    """After `burst` immediate tokens each further one is due 1/qps later than the last."""
    clock = Clock()
    bucket = backoff.TokenBucket(2.0, 3, clock)
    assert [bucket.when() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert [bucket.when() for _ in range(3)] == [0.5, 1.0, 1.5]
    clock.now += 10.0  # refilled, never above burst
    assert [bucket.when() for _ in range(4)] == [0.0, 0.0, 0.0, 0.5]


def test_max_of_takes_the_longer_delay() -> None:
    """Many keys failing at once are held to the bucket's rate, one key to its own backoff."""
    clock = Clock()
    limiter = backoff.controller_limiter(
        item=backoff.Policy(initial=0.5, cap=60.0), qps=1.0, burst=2, clock=clock
    )
    delays = [limiter.when(f"n{i}") for i in range(5)]
    assert delays == [0.5, 0.5, 1.0, 2.0, 3.0]  # item 0.5 each, then the bucket's pacing
    clock.now += 100.0
    assert [limiter.when("n0") for _ in range(3)] == [1.0, 2.0, 4.0]  # n0's own count: 2, 3, 4
    assert limiter.failures("n0") == 4
    limiter.forget("n0")
    assert limiter.failures("n0") == 0
