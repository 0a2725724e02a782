"""One in-memory series: parallel columns of timestamps and values.

Internal to `metriccache.cache`, which holds the lock; nothing here is
thread-safe on its own. Timestamps are kept sorted so a window query is two
bisections and one C-level slice. Collectors append in time order, so the
common path is `array.append`; an out-of-order sample is inserted in place
(O(n), rare). Samples with equal timestamps keep their arrival order, so
`last` is the value appended last.

Samples not yet written to disk are also kept, in arrival order, in a second
pair of columns (`pending`); `take_pending` hands them to the flusher sorted.

Both pairs of columns hold at most `capacity` samples: when one overflows,
the oldest `capacity // 16 + 1` samples are shed at once (amortised O(1)).
This is what bounds memory by construction, whatever the append rate.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from itertools import pairwise

# Values held in memory are float32 (4 bytes, not 8: at 250 pods that is 5 MiB of the
# agent's RSS). 24 bits of mantissa keep memory usage, a multiple of the 4 KiB page,
# exact up to 64 GiB and every other value to 6e-8 relative; the samples not yet
# flushed stay float64, so the file keeps what the collectors measured.
VALUE_TYPECODE = "f"

# Bookkeeping of one series besides its columns: the Series object, four array
# headers, its key tuple and its slot in the kind's table (measured: ~560 B).
SERIES_OVERHEAD_BYTES = 768


def series_max_bytes(capacity: int, n_labels: int, max_label_length: int) -> int:
    """Upper bound of the memory one series takes, `capacity` samples per column pair.

    CPython grows an `array` to n + n/16 + 7 items, and a column holds at
    most capacity + 1 items before shedding; three columns are float64 (the
    times and the unflushed pair), the values float32; a label value is a str
    of at most 4 bytes per character plus its 80-byte header.
    """
    items = (capacity + 1) * 17 // 16 + 8
    columns = (3 * 8 + array(VALUE_TYPECODE).itemsize) * items
    return columns + SERIES_OVERHEAD_BYTES + n_labels * (80 + 4 * max_label_length)


def sort_columns(ts: array[float], vals: array[float]) -> tuple[array[float], array[float]]:
    """Both columns reordered by timestamp; equal timestamps keep their order."""
    order = sorted(range(len(ts)), key=ts.__getitem__)
    return array("d", [ts[i] for i in order]), array(vals.typecode, [vals[i] for i in order])


def is_sorted(ts: array[float]) -> bool:
    """Whether `ts` is non-decreasing."""
    return all(a <= b for a, b in pairwise(ts))


class Series:
    """The samples of one (kind, label values) pair, oldest first."""

    __slots__ = (
        "capacity",
        "key",
        "pending_sorted",
        "pending_ts",
        "pending_vals",
        "persisted",
        "sid",
        "ts",
        "vals",
    )

    def __init__(
        self,
        sid: int,
        key: tuple[str, ...],
        capacity: int,
        *,
        track_pending: bool,
        persisted: bool = False,
    ) -> None:
        self.sid = sid
        self.key = key
        self.capacity = capacity
        self.ts: array[float] = array("d")
        self.vals: array[float] = array(VALUE_TYPECODE)
        # None when the cache has no backing file: nothing is ever flushed.
        self.pending_ts: array[float] | None = array("d") if track_pending else None
        self.pending_vals: array[float] = array("d")
        self.pending_sorted = True
        # Whether the series row exists on disk (its samples may still be pending).
        self.persisted = persisted

    def __len__(self) -> int:
        return len(self.ts)

    def add(self, t: float, v: float) -> None:
        """Store one sample (caller validated it)."""
        ts = self.ts
        if not ts or t >= ts[-1]:
            ts.append(t)
            self.vals.append(v)
        else:
            i = bisect_right(ts, t)
            ts.insert(i, t)
            self.vals.insert(i, v)
        if len(ts) > self.capacity:
            shed = self.capacity // 16 + 1
            del ts[:shed]
            del self.vals[:shed]
        pts = self.pending_ts
        if pts is not None:
            if pts and t < pts[-1]:
                self.pending_sorted = False
            pts.append(t)
            self.pending_vals.append(v)
            if len(pts) > self.capacity:
                shed = self.capacity // 16 + 1
                del pts[:shed]
                del self.pending_vals[:shed]

    def trim(self, cutoff: float) -> bool:
        """Drop samples older than `cutoff`; return whether the series is now empty."""
        i = bisect_left(self.ts, cutoff)
        if i:
            del self.ts[:i]
            del self.vals[:i]
        return not self.ts

    def window(self, start: float, end: float) -> tuple[float, float, array[float]] | None:
        """First time, last time and values of the samples in [start, end], or None."""
        ts = self.ts
        i = bisect_left(ts, start)
        j = bisect_right(ts, end)
        if i >= j:
            return None
        return ts[i], ts[j - 1], self.vals[i:j]

    def take_pending(self) -> tuple[array[float], array[float]] | None:
        """The unflushed samples sorted by time, now no longer pending; None if none."""
        pts = self.pending_ts
        if not pts:
            return None
        pvals = self.pending_vals
        self.pending_ts = array("d")
        self.pending_vals = array("d")
        if not self.pending_sorted:
            self.pending_sorted = True
            return sort_columns(pts, pvals)
        return pts, pvals

    def restore_pending(self, ts: array[float], vals: array[float]) -> None:
        """Put back samples a failed flush took, ahead of those added since."""
        if self.pending_ts is None:
            return
        merged_ts = ts + self.pending_ts
        merged_vals = vals + self.pending_vals
        overflow = len(merged_ts) - self.capacity
        if overflow > 0:
            del merged_ts[:overflow]
            del merged_vals[:overflow]
        self.pending_ts, self.pending_vals = merged_ts, merged_vals
        self.pending_sorted = is_sorted(merged_ts)

    def load(self, ts: array[float], vals: array[float]) -> bool:
        """Append a segment read from disk; return whether order may now be broken."""
        broken = bool(self.ts) and bool(ts) and ts[0] < self.ts[-1]
        self.ts.extend(ts)
        self.vals.extend(array(VALUE_TYPECODE, vals))
        return broken

    def finish_load(self, cutoff: float, resort: bool) -> bool:
        """Sort if needed, drop expired and excess samples; return whether empty."""
        if resort:
            self.ts, self.vals = sort_columns(self.ts, self.vals)
        overflow = len(self.ts) - self.capacity
        if overflow > 0:
            del self.ts[:overflow]
            del self.vals[:overflow]
        return self.trim(cutoff)
