"""A fake node's CPU counters as a pure function of time, rendered by the agent's own clock.

The agent computes a CPU rate as the counter's growth between two rounds over
the difference of the rounds' monotonic timestamps (`agent.collectors.base`).
A fake node whose files a separate writer refreshes every few milliseconds
gets that wrong on a busy machine: one stalled write (a page-cache write under
heavy writeback, a descheduled thread) leaves a stale value, one sample's rate
comes out several percent high, and a p99 or max aggregate keeps it. Here
nothing refreshes the files on a timer. The test side (`clusterkit.LiveNode`)
publishes what each counter is - a path, a base value, a start time, cores -
in a JSON spec (`write_spec`), and the agent runs with a `LiveClock`: each
time a collection round reads the clock, the clock writes every counter's
value for exactly the instant it then returns. Whatever stalls where, a round
reads the counters as they were at its own timestamp, so the measured rates
are exact (the USER_HZ /proc/stat counter too: the clock returns the instant
that counter last ticked, so its integer value carries no rounding error).

    python -m tests.agent.livenode SPEC.json --node-name n1 ...   # the agent's flags

runs `nodeqos-agent` with a `LiveClock` over SPEC.json. Only the thread that
runs the collection rounds (the main thread) renders; the other threads'
readings of the clock (the reporter, the plugins) are the system's.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

# the fake /proc/stat's idle ticks: constant (the agent measures busy ticks only)
IDLE_TICKS = 10**9


def proc_stat(busy: int) -> str:
    """A /proc/stat whose aggregate and cpu0 lines have `busy` user ticks."""
    line = f"{busy} 0 0 {IDLE_TICKS} 0 0 0 0 0 0"
    return f"cpu  {line}\ncpu0 {line}\nintr 1 0\nctxt 2\nbtime 1700000000\nprocesses 3\n"


def cpu_stat_v2(usage_ns: int) -> str:
    """A cgroup v2 cpu.stat of `usage_ns` nanoseconds of usage, never throttled."""
    usec = usage_ns // 1000
    return (
        f"usage_usec {usec}\nuser_usec {usec}\nsystem_usec 0\n"
        "nr_periods 0\nnr_throttled 0\nthrottled_usec 0\nnr_bursts 0\nburst_usec 0\n"
    )


RENDERERS: dict[str, Callable[[int], str]] = {"proc_stat": proc_stat, "cpu_stat_v2": cpu_stat_v2}


@dataclass(frozen=True, slots=True)
class Counter:
    """A CPU counter that grows at `cores` from `since` (time.monotonic) on."""

    path: str
    format: str  # a key of RENDERERS
    cores: float
    base: int  # nanoseconds (cgroups) or ticks (/proc/stat) at `since`
    since: float
    per_core: int  # counter units per core-second

    @property
    def per_second(self) -> float:
        return self.cores * self.per_core

    def value(self, now: float) -> int:
        return self.base + math.floor(self.per_second * (now - self.since))

    def moved_to(self, cores: float, now: float) -> Counter:
        """The same counter, growing at `cores` from `now` on."""
        return Counter(self.path, self.format, cores, self.value(now), now, self.per_core)

    def last_tick(self, now: float) -> float:
        """The instant at or before `now` when the counter reached its value at `now`."""
        if self.per_second <= 0:
            return now
        return min(now, self.since + (self.value(now) - self.base) / self.per_second)


def write_in_place(path: str, text: str) -> None:
    """Overwrite a file whose content only grows, without ever truncating it.

    The agent keeps the file open and re-reads it with pread: it never sees a
    half-written or empty file.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, text.encode(), 0)
    finally:
        os.close(fd)


def render(counters: Iterable[Counter], now: float) -> None:
    """Write every counter's value at `now` into its file."""
    for counter in counters:
        write_in_place(counter.path, RENDERERS[counter.format](counter.value(now)))


def write_spec(path: Path, counters: Iterable[Counter]) -> None:
    """Publish the counters atomically (a reader sees the old spec or the new one)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps([asdict(c) for c in counters]))
    os.replace(tmp, path)


def read_spec(path: Path) -> list[Counter]:
    return [Counter(**raw) for raw in json.loads(path.read_text())]


class LiveClock:
    """The system clock, except that a main-thread `monotonic()` first renders the counters.

    The instant returned is the last tick of the /proc/stat counter (at most
    1/(cores x USER_HZ) s ago, and never earlier than a previous answer), so
    every counter, integer ticks included, holds exactly its value then.
    """

    def __init__(self, spec: Path) -> None:
        self._spec = spec
        self._main = threading.main_thread()

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        now = time.monotonic()
        if threading.current_thread() is not self._main:
            return now
        counters = read_spec(self._spec)
        ticking = [c for c in counters if c.format == "proc_stat"]
        at = min((c.last_tick(now) for c in ticking), default=now)
        render(counters, at)
        return at


def main(argv: list[str]) -> None:
    from agent import cli  # the agent's import cost only where it runs

    spec, *agent_args = argv
    cli.run(agent_args, clock=LiveClock(Path(spec)))


if __name__ == "__main__":
    main(sys.argv[1:])
