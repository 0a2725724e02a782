"""Appends, queries, flushes and key/value writes from several threads at once."""

from __future__ import annotations

import threading
from collections.abc import Callable

from metriccache import kinds
from tests.metriccache.builders import T0, FakeClock, OpenCache, node, pod

WRITERS = 4
ROUNDS = 200
PODS_PER_WRITER = 10


def _run_all(targets: list[Callable[[], None]]) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(len(targets))

    def wrap(target: Callable[[], None]) -> None:
        try:
            start.wait()
            target()
        except BaseException as err:  # collected and asserted on by the test
            errors.append(err)

    threads = [threading.Thread(target=wrap, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return errors


def test_concurrent_append_query_flush_lose_nothing(
    open_cache: OpenCache, clock: FakeClock
) -> None:
    """Writers, readers, a flusher and kv writers in parallel: every sample lands once."""
    clock.now = T0 + ROUNDS
    cache = open_cache(flush_interval=0.005)
    done = threading.Event()

    def writer(w: int) -> Callable[[], None]:
        def run() -> None:
            for r in range(ROUNDS):
                batch = [pod(f"w{w}-p{p}", T0 + r, float(r)) for p in range(PODS_PER_WRITER)]
                batch.append(node(T0 + r + w / 10, 1.0))
                cache.append(batch)

        return run

    def reader() -> None:
        while not done.is_set():
            every = cache.aggregate_all(kinds.POD_CPU_USAGE, {}, T0, T0 + ROUNDS)
            for agg in every.values():
                assert agg.count >= 1
                assert agg.first_time <= agg.last_time
            cache.aggregate(kinds.NODE_CPU_USAGE, {}, T0, T0 + ROUNDS)

    def flusher() -> None:
        while not done.is_set():
            cache.flush()

    def kv_writer() -> None:
        for i in range(50):
            cache.kv_set(f"fact-{i % 5}", {"i": i})
            cache.kv_get("fact-0")

    writers = [writer(w) for w in range(WRITERS)]

    def writers_then_done() -> None:
        errors = _run_all([*writers, kv_writer])
        done.set()
        if errors:
            raise errors[0]

    errors = _run_all([writers_then_done, reader, reader, flusher])
    assert errors == []
    cache.flush()
    every = cache.aggregate_all(kinds.POD_CPU_USAGE, {}, T0, T0 + ROUNDS)
    assert len(every) == WRITERS * PODS_PER_WRITER
    assert {agg.count for agg in every.values()} == {ROUNDS}
    node_agg = cache.aggregate(kinds.NODE_CPU_USAGE, {}, T0, T0 + ROUNDS + 1)
    assert node_agg is not None
    assert node_agg.count == WRITERS * ROUNDS
    assert cache.stats().pending_samples == 0
    cache.close()
    reopened = open_cache()
    again = reopened.aggregate_all(kinds.POD_CPU_USAGE, {}, T0, T0 + ROUNDS)
    assert {key: agg.count for key, agg in again.items()} == {
        key: agg.count for key, agg in every.items()
    }
    assert reopened.kv_get("fact-4") == {"i": 49}
