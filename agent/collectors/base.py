"""What every collector shares: the round it fills, error reasons, counter rates.

A collection round (`agent.collection.Collection.run_round`) makes one
`Round` - its timestamps plus the list of samples being built - and hands it to
each collector in turn. Collectors append samples and note the totals the
system-usage collector needs; they report a failure of one pod, container or
file through an `ErrorSink` with a `Reason` (which feeds
`nodeqos_agent_collector_errors_total{collector,reason}`) and carry on.

Counters become rates here: the first reading of a counter has no rate (it is
dropped), and a counter that went backwards (a restarted container, a
recreated cgroup) starts over without a sample for that round.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Protocol

import cgroups
from metriccache import Sample


class Reason(enum.Enum):
    """Why a collector lost samples; the `reason` label of the error counter."""

    GONE = "gone"  # the pod, container or file vanished (normal on a busy node)
    ACCESS_DENIED = "access_denied"
    MALFORMED = "malformed"
    IO_ERROR = "io_error"
    INTERNAL = "internal"  # a bug: the collector raised something unexpected


def reason_of(err: cgroups.CgroupError) -> Reason:
    """The reason code for a cgroups error."""
    if isinstance(err, cgroups.CgroupGone):
        return Reason.GONE
    if isinstance(err, cgroups.AccessDenied):
        return Reason.ACCESS_DENIED
    if isinstance(err, cgroups.MalformedFile):
        return Reason.MALFORMED
    return Reason.IO_ERROR


class ErrorSink(Protocol):
    """Counts a lost sample set: `errors(collector_name, reason)`."""

    def __call__(self, collector: str, reason: Reason, /) -> None: ...


# A per-round scratchpad, deliberately mutable: collectors fill it in order and
# the system collector reads what the node and pod collectors left there.
@dataclass(slots=True)
class Round:
    """One collection round: when it happened and what it has gathered so far."""

    index: int
    time: float  # wall clock, the timestamp of every sample of the round
    monotonic: float  # the denominator of rates
    samples: list[Sample] = field(default_factory=list)
    node_cpu_cores: float | None = None
    node_memory_bytes: int | None = None
    pods_cpu_cores: float = 0.0
    pods_cpu_complete: bool = True  # False when some pod's CPU rate is unknown
    pods_memory_bytes: int = 0
    host_apps_cpu_cores: float = 0.0
    host_apps_memory_bytes: int = 0
    host_apps_complete: bool = True


class Collector(Protocol):
    """One source of samples; `name` is the `collector` label of its metrics."""

    @property
    def name(self) -> str:
        """A short lowercase name, e.g. "pods"."""
        ...

    def collect(self, rnd: Round) -> None:
        """Append this round's samples to `rnd.samples`; never raise for one bad pod."""
        ...


def rate(prev_value: int, prev_time: float, value: int, now: float) -> float | None:
    """Per-second rate of a counter between two readings; None after a reset.

    A counter that went down was reset (its cgroup was recreated): there is no
    meaningful rate across the reset, so none is reported for this interval.
    """
    elapsed = now - prev_time
    if value < prev_value or elapsed <= 0:
        return None
    return (value - prev_value) / elapsed


class CounterRates:
    """Rates of counters by key, for collectors with a handful of counters.

    Keys not read in a round are forgotten when it ends (`end_round`), so a
    vanished cgroup leaves no state behind.
    """

    __slots__ = ("_next", "_prev")

    def __init__(self) -> None:
        self._prev: dict[object, tuple[int, float]] = {}
        self._next: dict[object, tuple[int, float]] = {}

    def update(self, key: object, value: int, now: float) -> float | None:
        """Record a reading; the rate since the previous one, or None."""
        self._next[key] = (value, now)
        prev = self._prev.get(key)
        return None if prev is None else rate(prev[0], prev[1], value, now)

    def end_round(self) -> None:
        """Forget keys that were not read this round."""
        self._prev, self._next = self._next, {}
