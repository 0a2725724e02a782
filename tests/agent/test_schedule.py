"""The collection schedule: fixed deadlines, no drift, no pile-up after a slow round."""

from __future__ import annotations

import pytest

from agent.schedule import Ticker, next_tick
from tests.agent.builders import MONO0, FakeClock


def _run(durations: list[float], interval: float = 1.0) -> tuple[list[float], int, list[int]]:
    """Run one round per entry of `durations` (each takes that long); return start times."""
    clock = FakeClock()
    starts: list[float] = []
    missed: list[int] = []

    def round_fn() -> None:
        starts.append(clock.monotonic() - MONO0)
        clock.advance(durations[len(starts) - 1])

    ticker = Ticker(interval, clock, clock.wait, on_missed=missed.append)
    stats = ticker.run(round_fn, max_rounds=len(durations))
    return starts, stats.missed, missed


def test_rounds_start_on_deadlines_without_drift() -> None:
    """Rounds taking 0.3 s still start at exactly 0, 1, 2, 3 s (no accumulated drift)."""
    starts, missed, _ = _run([0.3] * 4)
    assert starts == pytest.approx([0.0, 1.0, 2.0, 3.0])
    assert missed == 0


def test_slow_round_skips_missed_ticks_instead_of_piling_up() -> None:
    """A 2.5 s round skips ticks 1 and 2 (counted) and the next round waits for tick 3."""
    starts, missed, reported = _run([2.5, 0.1, 0.1])
    assert starts == pytest.approx([0.0, 3.0, 4.0])
    assert missed == 2
    assert reported == [2]


def test_round_ending_exactly_on_a_deadline_runs_it() -> None:
    """A round that ends exactly at tick 2 runs tick 2 at once; only tick 1 was missed."""
    starts, missed, _ = _run([2.0, 0.1], interval=1.0)
    assert starts == pytest.approx([0.0, 2.0])
    assert missed == 1


def test_duration_bounds_the_run() -> None:
    """With duration 3 s and interval 0.5 s, rounds run at 0, 0.5, ..., 3.0 s: seven rounds."""
    clock = FakeClock()
    starts: list[float] = []
    ticker = Ticker(0.5, clock, clock.wait)
    stats = ticker.run(lambda: starts.append(clock.monotonic() - MONO0), duration=3.0)
    assert stats.rounds == 7
    assert starts == pytest.approx([0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0])


def test_stop_ends_the_wait() -> None:
    """When `wait` reports a stop, no further round runs."""
    clock = FakeClock()
    calls: list[float] = []
    ticker = Ticker(1.0, clock, lambda _seconds: True)
    stats = ticker.run(lambda: calls.append(clock.monotonic()))
    assert stats.rounds == 1 and len(calls) == 1


@pytest.mark.parametrize(
    ("last", "now", "expected"),
    [
        pytest.param(0, 0.2, (1, 0), id="on-time"),
        pytest.param(0, 1.0, (1, 0), id="exactly-at-deadline"),
        pytest.param(0, 3.7, (4, 3), id="overran-three-ticks"),
        pytest.param(5, 5.1, (6, 0), id="later-round"),
    ],
)
def test_next_tick(last: int, now: float, expected: tuple[int, int]) -> None:
    """The next round is the first deadline not yet past; skipped ticks are counted."""
    assert next_tick(0.0, 1.0, last, now) == expected


def test_interval_must_be_positive() -> None:
    """A zero interval is refused."""
    clock = FakeClock()
    with pytest.raises(ValueError, match="interval"):
        Ticker(0.0, clock, clock.wait)
