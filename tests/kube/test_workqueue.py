"""The keyed work queue behind parallel controllers: one worker per key, latest state wins."""

from __future__ import annotations

import threading
from collections import defaultdict

from kube import workqueue


def test_a_key_added_twice_waits_once_with_its_oldest_time() -> None:
    """Two adds of a waiting key: served once, with the first add's time."""
    queue = workqueue.KeyedQueue()
    queue.add("n1", 1.0)
    queue.add("n1", 2.0)
    assert len(queue) == 1
    assert queue.get(timeout=0) == ("n1", 1.0)
    assert queue.get(timeout=0) is None


def test_keys_are_served_in_the_order_they_became_dirty() -> None:
    """FIFO over keys; re-adding a waiting key does not move it."""
    queue = workqueue.KeyedQueue()
    for key in ("b", "a", "c", "b"):
        queue.add(key, 0.0)
    taken = [queue.get(timeout=0) for _ in range(3)]
    assert [item[0] for item in taken if item] == ["b", "a", "c"]


def test_a_held_key_is_never_handed_to_a_second_worker() -> None:
    """Added while held: no other get sees it until done, then it is queued again."""
    queue = workqueue.KeyedQueue()
    queue.add("n1", 1.0)
    assert queue.get(timeout=0) == ("n1", 1.0)
    queue.add("n1", 5.0)
    queue.add("n1", 6.0)
    assert queue.get(timeout=0) is None
    assert (len(queue), queue.held) == (0, 1)
    queue.done("n1")
    assert queue.get(timeout=0) == ("n1", 5.0)
    queue.done("n1")
    assert (len(queue), queue.held) == (0, 0)


def test_done_without_a_new_add_forgets_the_key() -> None:
    """A key not added while held is gone after done."""
    queue = workqueue.KeyedQueue()
    queue.add("n1", 1.0)
    queue.get(timeout=0)
    queue.done("n1")
    assert queue.get(timeout=0) is None


def test_get_wakes_when_a_key_arrives() -> None:
    """A worker blocked in get takes a key added from another thread."""
    queue = workqueue.KeyedQueue()
    got: list[tuple[str, float] | None] = []
    worker = threading.Thread(target=lambda: got.append(queue.get(timeout=30)))
    worker.start()
    queue.add("n1", 3.0)
    worker.join(30)
    assert got == [("n1", 3.0)]


def test_parallel_workers_keep_one_per_key_and_end_on_the_latest_state() -> None:
    """Six workers, many updates of eight keys: never two workers on a key, and each
    key's last sync saw its last update."""
    queue = workqueue.KeyedQueue()
    version: dict[str, int] = defaultdict(int)
    seen: dict[str, int] = {}
    in_flight: dict[str, int] = defaultdict(int)
    overlaps: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    progress = threading.Condition()

    def work() -> None:
        while not stop.is_set():
            item = queue.get(timeout=0.1)
            if item is None:
                continue
            key = item[0]
            with lock:
                in_flight[key] += 1
                if in_flight[key] > 1:
                    overlaps.append(key)
                seen[key] = version[key]  # what a controller reads from its cache
            with lock:
                in_flight[key] -= 1
            queue.done(key)
            with progress:
                progress.notify_all()

    workers = [threading.Thread(target=work) for _ in range(6)]
    for worker in workers:
        worker.start()
    keys = [f"n{i}" for i in range(8)]
    for round_ in range(500):
        key = keys[round_ % len(keys)]
        with lock:
            version[key] += 1
        queue.add(key, float(round_))
    with progress:
        drained = progress.wait_for(lambda: not len(queue) and not queue.held, timeout=30)
    stop.set()
    for worker in workers:
        worker.join(30)
    assert drained, "the workers did not drain the queue in 30 s"
    assert not overlaps
    assert seen == dict(version)


def test_events_are_served_before_background_marks() -> None:
    """A resync's background marks wait behind every event, whatever the order of adds."""
    queue = workqueue.KeyedQueue()
    queue.add_background("a")
    queue.add_background("b")
    queue.add("c", 1.0)
    taken = [queue.get(timeout=0) for _ in range(3)]
    assert taken == [("c", 1.0), ("a", None), ("b", None)]


def test_an_event_moves_a_background_key_up_with_its_time() -> None:
    """An add of a key waiting in the background serves it among the events, timed."""
    queue = workqueue.KeyedQueue()
    queue.add_background("a")
    queue.add_background("b")
    queue.add("b", 2.0)
    queue.add_background("b")  # a later resync changes nothing
    assert queue.get(timeout=0) == ("b", 2.0)
    assert queue.get(timeout=0) == ("a", None)
    assert len(queue) == 0


def test_a_held_key_marked_in_the_background_comes_back_in_the_background() -> None:
    """Held, then a resync mark: back in the background lane; an event meanwhile wins."""
    queue = workqueue.KeyedQueue()
    queue.add("a", 1.0)
    queue.add("b", 1.0)
    queue.get(timeout=0)
    queue.get(timeout=0)
    queue.add_background("a")
    queue.add_background("b")
    queue.add("b", 3.0)
    queue.done("a")
    queue.done("b")
    assert queue.get(timeout=0) == ("b", 3.0)
    assert queue.get(timeout=0) == ("a", None)
