"""Rebuilding the in-memory series from the backing file when the cache opens.

Called by `MetricCache.open` through `metriccache.store.open_store`, which
moves the file aside if this raises `CorruptStoreError` or a SQLite
`DatabaseError`. Only samples still inside their kind's retention are loaded,
so the 5-minute aggregates are available at once after a restart and memory
stays within the same bound as in a running cache.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from metriccache import store as storage
from metriccache.model import KindState
from metriccache.series import Series

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Recovered:
    """What `recover` read: series in place in `states`, plus bookkeeping."""

    states: dict[str, KindState]
    series: int
    removed_sids: list[int]
    next_sid: int
    kv: dict[str, str]


def recover(
    store: storage.Store,
    states: dict[str, KindState],
    *,
    now: float,
    max_series: int,
) -> Recovered:
    """Fill the (empty) `states` from `store` with the samples after each retention cutoff."""
    dropped_kinds = store.drop_kinds_except(list(states))
    if dropped_kinds:
        log.info("metric cache: dropped %d series of kinds no longer registered", dropped_kinds)
    owned: dict[int, tuple[KindState, Series]] = {}
    stale: list[int] = []
    for rec in store.load_series():
        st = states[rec.kind]
        if sorted(rec.labels) != sorted(st.kind.labels):
            stale.append(rec.sid)  # the kind's label schema changed; the series is useless
            continue
        key = st.key_of(rec.labels)
        owned[rec.sid] = st, Series(rec.sid, key, st.capacity, track_pending=True, persisted=True)
    resort: set[int] = set()
    for name, st in states.items():
        for sid, ts, vals in store.load_segments(name, now - st.kind.retention_seconds):
            entry = owned.get(sid)
            if entry is not None and entry[0] is st and entry[1].load(ts, vals):
                resort.add(sid)
    live: list[tuple[KindState, Series]] = []
    for sid, (st, series) in owned.items():
        if series.finish_load(now - st.kind.retention_seconds, sid in resort):
            stale.append(sid)
        else:
            live.append((st, series))
    if len(live) > max_series:  # the cap was lowered since the file was written
        live.sort(key=lambda entry: entry[1].ts[-1], reverse=True)
        stale.extend(series.sid for _, series in live[max_series:])
        del live[max_series:]
    for st, series in live:
        st.table[series.key] = series
    return Recovered(states, len(live), stale, store.next_series_id(), store.load_kv())
