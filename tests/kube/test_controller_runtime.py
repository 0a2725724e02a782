"""kube.controller's runtime: rate-limited retries, the outage gate, the resync lane."""

from __future__ import annotations

import threading

import pytest

from kube import backoff, controller, rest


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Script:
    """A sync whose outcome per key is scripted; records every call."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fail: dict[str, BaseException] = {}

    def __call__(self, key: str, since: float | None) -> None:
        self.calls.append(key)
        error = self.fail.get(key)
        if error is not None:
            raise error


def runtime(
    script: Script, clock: Clock, keys: list[str], **kwargs: object
) -> controller.Controller:
    return controller.Controller(
        "test",
        script,
        keys=lambda: keys,
        limiter=backoff.controller_limiter(
            item=backoff.Policy(initial=0.5, cap=60.0), qps=100.0, burst=100, clock=clock
        ),
        outage=backoff.Policy(initial=1.0, cap=30.0),
        clock=clock,
        resync_seconds=60.0,
        **kwargs,  # type: ignore[arg-type]
    )


def test_a_failed_key_comes_back_after_its_backoff_and_success_forgets_it() -> None:
    """An object's failure is retried after 0.5 s, then 1 s; a success resets its count."""
    clock, script = Clock(), Script()
    run = runtime(script, clock, ["a"])
    script.fail["a"] = controller.Failed("422")
    run.add("a")
    assert run.drain() == 1
    assert run.retrying("a") and run.drain() == 0  # not before its delay
    clock.now += 0.49
    run.tick()
    assert run.drain() == 0
    clock.now += 0.02
    run.tick()
    assert run.drain() == 1  # second failure: 1 s now
    clock.now += 0.6
    run.tick()
    assert run.drain() == 0
    clock.now += 0.5
    run.tick()
    del script.fail["a"]
    assert run.drain() == 1
    assert run.limiter.failures("a") == 0 and not run.retrying("a")
    assert script.calls == ["a", "a", "a"]


def test_an_outage_admits_one_probe_per_gate_delay() -> None:
    """ApiUnavailable closes the gate: no key is synced until its delay, then one probe."""
    clock, script = Clock(), Script()
    run = runtime(script, clock, [])
    for key in ("a", "b", "c"):
        script.fail[key] = rest.ApiUnavailable("connection refused")
        run.add(key)
    assert run.process(timeout=0)  # the first failure closes the gate for 1 s
    assert not run.gate.open
    assert run.drain() == 0 and script.calls == ["a"]
    clock.now += 1.0
    assert run.process(timeout=0)  # one probe
    assert not run.process(timeout=0)  # nobody else while it failed: 2 s now
    clock.now += 1.9
    assert not run.process(timeout=0)
    clock.now += 0.1
    for key in ("a", "b", "c"):
        del script.fail[key]
    assert run.process(timeout=0)  # the probe succeeds: open for all
    assert run.gate.open
    assert run.drain() == 2
    assert script.calls == ["a", "b", "c", "a", "b"]
    assert sorted(script.calls[-3:]) == ["a", "b", "c"]
    assert run.limiter.failures("a") == 0  # an outage does not count against a key


def test_syncs_in_flight_when_an_outage_starts_do_not_lengthen_the_gate() -> None:
    """Only the first failure and failed probes advance the outage backoff."""
    gate = controller.Gate(backoff.Policy(initial=1.0, cap=30.0), clock=Clock())
    assert gate.acquire(0) is True and gate.acquire(0) is True
    assert gate.unavailable(probe=False) == 1.0
    assert gate.unavailable(probe=False) == 1.0  # the second worker's failure
    assert gate.closings == 1


def test_resync_skips_keys_in_failure_backoff_and_events_supersede_it() -> None:
    """A resync does not cut a backoff short; a fresh event does."""
    clock, script = Clock(), Script()
    run = runtime(script, clock, ["a", "b"])
    script.fail["a"] = controller.Failed("500")
    run.add("a")
    run.drain()
    del script.fail["a"]
    run.add_all()
    assert run.drain() == 1 and script.calls == ["a", "b"]  # a still waits its 0.5 s
    run.add("a")  # an event: the object changed, look now
    assert run.drain() == 1 and not run.retrying("a")
    clock.now += 1.0
    run.tick()  # the superseded retry does not come back
    assert run.drain() == 0
    assert script.calls == ["a", "b", "a"]


def test_resync_lane_marks_every_key_when_due() -> None:
    """tick() queues every key once resync_seconds have passed."""
    clock, script = Clock(), Script()
    run = runtime(script, clock, ["a", "b"])
    assert run.tick() == pytest.approx(60.0)
    clock.now += 60.0
    run.tick()
    assert run.drain() == 2


def test_a_refused_write_waits_for_leadership_without_backoff() -> None:
    """WriteRefused (not leading) requeues the key: no outage, no failure count."""
    clock, script = Clock(), Script()
    run = runtime(script, clock, [])
    script.fail["a"] = rest.WriteRefused("not leading")
    run.add("a")
    assert run.drain() == 1
    assert run.gate.open and run.limiter.failures("a") == 0 and len(run.queue) == 1


def test_run_syncs_with_workers_and_stops_within_its_bound() -> None:
    """run() starts workers that only act while may_act(); stop ends it promptly."""
    synced = threading.Event()
    calls: list[str] = []

    def sync(key: str, since: float | None) -> None:
        calls.append(key)
        synced.set()

    leading = threading.Event()
    run = controller.Controller("threads", sync, keys=lambda: ["x"], workers=2)
    stop = threading.Event()
    thread = threading.Thread(target=run.run, args=(stop, leading.is_set), daemon=True)
    thread.start()
    try:
        run.add("y")
        assert not synced.wait(0.3)  # not leading: nothing synced
        leading.set()
        run.wake()
        assert synced.wait(5.0)
    finally:
        stop.set()
        thread.join(10.0)
    assert not thread.is_alive()
    assert set(calls) <= {"x", "y"} and "y" in calls
