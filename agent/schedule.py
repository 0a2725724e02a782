"""The collection schedule: rounds on fixed deadlines that neither drift nor pile up.

Round k is due at ``start + k * interval`` (monotonic clock). A round that
overruns one or more deadlines does not trigger a burst of catch-up rounds:
the ticks it overran are skipped and counted (`on_missed`), and the next round
runs at the first deadline not yet past. Sleeping between rounds goes through
an injected `wait(seconds) -> stopped`, so a stop request ends the wait at once
and tests drive the schedule with a fake clock instead of real time.

The agent's collection loop (`agent.assembly.collect`) runs on a `Ticker`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class Clock(Protocol):
    """Wall time for sample timestamps, monotonic time for deadlines and rates."""

    def time(self) -> float:
        """Seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back."""
        ...


@dataclass(frozen=True, slots=True)
class SystemClock:
    """The real clocks."""

    def time(self) -> float:
        """`time.time()`."""
        return time.time()

    def monotonic(self) -> float:
        """`time.monotonic()`."""
        return time.monotonic()


def next_tick(start: float, interval: float, last: int, now: float) -> tuple[int, int]:
    """The next round's index after round `last`, and how many ticks were skipped.

    The next round is the first whose deadline ``start + k * interval`` is not
    yet past at `now` (a deadline exactly at `now` still counts as on time).
    """
    due = math.ceil((now - start) / interval)
    following = max(last + 1, due)
    return following, following - last - 1


@dataclass(frozen=True, slots=True)
class RunStats:
    """What a `Ticker.run` did: rounds run and ticks skipped because a round overran."""

    rounds: int
    missed: int


class Ticker:
    """Runs a round function on the deadline schedule described in the module doc."""

    __slots__ = ("_clock", "_interval", "_on_missed", "_wait")

    def __init__(
        self,
        interval: float,
        clock: Clock,
        wait: Callable[[float], bool],
        *,
        on_missed: Callable[[int], None] = lambda _n: None,
    ) -> None:
        if not interval > 0:
            raise ValueError(f"interval must be > 0, got {interval}")
        self._interval = interval
        self._clock = clock
        self._wait = wait
        self._on_missed = on_missed

    def run(
        self,
        round_fn: Callable[[], object],
        *,
        duration: float | None = None,
        max_rounds: int | None = None,
    ) -> RunStats:
        """Run rounds until `wait` reports a stop, `duration` seconds have passed
        (the last round is the one due at or before start + duration), or
        `max_rounds` rounds ran. The first round runs at once.
        """
        start = self._clock.monotonic()
        index, rounds, missed = 0, 0, 0
        while True:
            round_fn()
            rounds += 1
            if max_rounds is not None and rounds >= max_rounds:
                break
            now = self._clock.monotonic()
            index, skipped = next_tick(start, self._interval, index, now)
            if skipped:
                missed += skipped
                self._on_missed(skipped)
            deadline = start + index * self._interval
            if duration is not None and deadline > start + duration + 1e-9:
                break
            if self._wait(max(0.0, deadline - now)):
                break
        return RunStats(rounds=rounds, missed=missed)
