"""Per-node anomaly detection: a node is acted on only after it stays hot.

The plugin keeps one `AnomalyDetector` for its whole life (state persists
across cycles); `plan` calls `observe` once per node with known load and
cycle, with the node's pool's `anomalyCondition`. Time comes only from the
`now` each call is given. Each node has its own record per `Track` (node load,
prod load); nothing done to one record touches another.

The state machine (one record):

    NORMAL   --hot, streak reaches consecutiveAbnormalities-->  ABNORMAL
    NORMAL   --not hot-->                                       NORMAL, streak 0
    ABNORMAL --not hot, streak reaches consecutiveNormalities--> NORMAL
    ABNORMAL --hot-->                                           ABNORMAL, streak 0
    ABNORMAL --`timeout` after it began-->                      NORMAL, streak 0
    any      --not observed for `forget_after`, or `reset`-->   forgotten (NORMAL, 0)

`observe` answers whether to act: the node is hot now and ABNORMAL. So with
consecutiveAbnormalities N, a node is a source at its N-th consecutive hot
observation; with N = 1 at the first (scenario D1). While ABNORMAL, a node
that cools down briefly and heats up again is acted on at once, unless it
stayed cool for consecutiveNormalities observations in a row.

Compared with Koordinator (`pkg/descheduler/utils/anomaly/basic_detector.go`
and `filterRealAbnormalNodes` in `loadaware/low_node_load.go`):

- Koordinator's conditions are `ConsecutiveAbnormalities > N` and
  `ConsecutiveNormalities > M`, so it needs N+1 hot readings (6 with the
  default 5) except for N = 1, where it skips the detector altogether. Here
  the counts mean what they say: N readings, M readings.
- `anomalyCondition.timeout` is, as there, how long the ABNORMAL state lasts
  before the node has to prove itself again ("the expiration time of the
  abnormal state").
- `forget_after` is `detectorCacheTimeout` (Koordinator's go-cache TTL for a
  node's detector): a record not observed for that long is dropped.
- Koordinator only marks nodes that are hot, resets nodes that are low and
  leaves nodes between the marks untouched, so a streak survives readings
  between the marks. Here every observation counts: any reading that is not
  hot breaks a NORMAL streak.
- Resetting after acting is the caller's choice (`reset`); Koordinator resets a
  source once its projected usage is back under the high mark.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from descheduler.plugins.lownodeload.args import AnomalyCondition
from descheduler.plugins.lownodeload.classify import Track
from kube import objects

__all__ = ["AnomalyDetector", "State", "Status"]


class State(enum.StrEnum):
    """Whether a node is considered abnormal (to be acted on while hot)."""

    NORMAL = "normal"
    ABNORMAL = "abnormal"


class Status(NamedTuple):
    """A record as last stored: the state and its current streak."""

    state: State
    streak: int


@dataclass(slots=True)
class _Record:
    state: State
    streak: int  # hot readings in a row while NORMAL, cool ones while ABNORMAL
    since: datetime  # when ABNORMAL began
    seen: datetime  # the last observation


_Key = tuple[objects.NodeName, Track]
_FRESH = Status(State.NORMAL, 0)


class AnomalyDetector:
    """Per-node, per-track anomaly records that live across cycles."""

    def __init__(self, *, forget_after: timedelta = timedelta(minutes=5)) -> None:
        self._forget_after = forget_after
        self._records: dict[_Key, _Record] = {}

    def observe(
        self,
        node: objects.NodeName,
        *,
        hot: bool,
        now: datetime,
        condition: AnomalyCondition,
        track: Track = Track.NODE,
    ) -> bool:
        """Record one reading; True when the node should be acted on now."""
        key = (node, track)
        record = self._records.get(key)
        if record is not None and now - record.seen > self._forget_after:
            record = None
        if (
            record is not None
            and record.state is State.ABNORMAL
            and now - record.since > condition.timeout
        ):
            record = None
        if record is None:
            record = _Record(State.NORMAL, 0, now, now)
        record.seen = now
        if record.state is State.NORMAL:
            record.streak = record.streak + 1 if hot else 0
            if record.streak >= condition.consecutive_abnormalities:
                record.state, record.streak, record.since = State.ABNORMAL, 0, now
        elif hot:
            record.streak = 0
        else:
            record.streak += 1
            if record.streak >= condition.consecutive_normalities:
                record.state, record.streak = State.NORMAL, 0
        if record.state is State.NORMAL and record.streak == 0:
            self._records.pop(key, None)  # same as no record: keep the map small
        else:
            self._records[key] = record
        return hot and record.state is State.ABNORMAL

    def status(self, node: objects.NodeName, track: Track = Track.NODE) -> Status:
        """The stored state and streak (NORMAL, 0 when there is no record)."""
        record = self._records.get((node, track))
        return _FRESH if record is None else Status(record.state, record.streak)

    def reset(self, node: objects.NodeName, track: Track | None = None) -> None:
        """Forget one node's record for `track`, or for every track when None."""
        for each in Track if track is None else (track,):
            self._records.pop((node, each), None)

    def prune(self, now: datetime) -> None:
        """Drop every record not observed for `forget_after` (e.g. deleted nodes)."""
        stale = [k for k, r in self._records.items() if now - r.seen > self._forget_after]
        for key in stale:
            del self._records[key]

    @property
    def tracked(self) -> int:
        """How many (node, track) records are held (no `__len__`: an empty detector is truthy)."""
        return len(self._records)
