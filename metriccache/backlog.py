"""What the backing file has not seen yet: the bookkeeping behind each flush.

Internal to `metriccache.cache`, which calls every method under its lock.
Unflushed samples live in the series themselves (`Series.take_pending`);
this records the rest - series created or removed, retention cutoffs to apply
on disk - and turns it all into one `FlushBatch`, or takes a failed batch back
so the next flush retries it.
"""

from __future__ import annotations

from metriccache import store as storage
from metriccache.model import KindState
from metriccache.series import Series


class Backlog:
    """Changes owed to the file since the last successful flush."""

    __slots__ = ("_created", "_cutoffs", "_removed")

    def __init__(self, removed_sids: list[int] | None = None) -> None:
        self._created: list[tuple[str, Series]] = []
        self._removed: list[int] = list(removed_sids or ())
        self._cutoffs: dict[str, float] = {}

    def created(self, kind: str, series: Series) -> None:
        """A new series needs its row."""
        self._created.append((kind, series))

    def removed(self, series: Series) -> None:
        """A series left memory; its row (if written) must go."""
        if series.persisted:
            self._removed.append(series.sid)

    def pruned(self, kind: str, cutoff: float) -> None:
        """Batches of `kind` entirely before `cutoff` can be deleted."""
        self._cutoffs[kind] = cutoff

    def collect(self, states: dict[str, KindState], next_sid: int) -> storage.FlushBatch:
        """Everything owed, taken out of the backlog and the series' pending columns."""
        new_series = []
        for name, series in self._created:
            st = states[name]
            if st.table.get(series.key) is series:  # not removed meanwhile
                series.persisted = True
                new_series.append(storage.SeriesRecord(series.sid, name, st.labels_of(series)))
        segments: dict[str, tuple[storage.Segment, ...]] = {}
        for name, st in states.items():
            taken = []
            for series in st.table.values():
                pending = series.take_pending()
                if pending is not None:
                    taken.append(storage.Segment(series.sid, *pending))
            if taken:
                segments[name] = tuple(taken)
        batch = storage.FlushBatch(
            new_series=tuple(new_series),
            segments=segments,
            removed_sids=tuple(self._removed),
            prune_before=self._cutoffs,
            next_sid=next_sid,
        )
        self._created, self._removed, self._cutoffs = [], [], {}
        return batch

    def restore(self, states: dict[str, KindState], batch: storage.FlushBatch) -> None:
        """Take back a batch that failed to write, ahead of what came since."""
        by_sid = {s.sid: (name, s) for name, st in states.items() for s in st.table.values()}
        for rec in batch.new_series:
            entry = by_sid.get(rec.sid)
            if entry is not None:
                entry[1].persisted = False
                self._created.append(entry)
        for segments in batch.segments.values():
            for seg in segments:
                entry = by_sid.get(seg.sid)
                if entry is not None:
                    entry[1].restore_pending(seg.ts, seg.vals)
        self._removed[:0] = batch.removed_sids
        for name, cutoff in batch.prune_before.items():
            self._cutoffs.setdefault(name, cutoff)
