"""A leader stops leading at its renew deadline, whatever its rounds are doing.

The Lease API is an in-memory fake whose requests can hang until the test
answers them, and the clock moves only by hand: a round stuck in a request is
what a leader whose connection to the API server hangs sees (issue #36).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator

import pytest

from kube import leaderelection
from tests.kube.fakelease import FakeClock, FakeLeaseApi

LEASE = "/apis/coordination.k8s.io/v1/namespaces/default/leases/lock"
# lease 3 s, renew deadline 2 s, retry 0.5 s, as the partition tests run them
CONFIG = leaderelection.Config(
    namespace="default",
    name="lock",
    identity="me",
    lease_duration=3.0,
    renew_deadline=2.0,
    retry_period=0.5,
)


class Callbacks:
    """Records on_started / on_stopped calls; `stopped` is set by the last one."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.stopped = threading.Event()

    def on_started(self) -> None:
        self.calls.append("started")

    def on_stopped(self) -> None:
        self.calls.append("stopped")
        self.stopped.set()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def api(clock: FakeClock) -> Iterator[FakeLeaseApi]:
    made = FakeLeaseApi(clock)
    yield made
    made.answer()  # never leave a round thread blocked


def elector(
    api: FakeLeaseApi, clock: FakeClock, callbacks: Callbacks
) -> leaderelection.LeaderElector:
    return leaderelection.LeaderElector(
        api,
        CONFIG,
        on_started=callbacks.on_started,
        on_stopped=callbacks.on_stopped,
        clock=clock,
    )


def in_background(elector: leaderelection.LeaderElector) -> threading.Thread:
    thread = threading.Thread(target=elector.try_acquire_or_renew, daemon=True)
    thread.start()
    return thread


def test_leading_ends_at_the_deadline_while_the_round_hangs(
    api: FakeLeaseApi, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A renewal stuck in its GET: is_leader turns false at last renewal + renew_deadline, on_stopped fires."""
    callbacks = Callbacks()
    lead = elector(api, clock, callbacks)
    assert lead.try_acquire_or_renew()
    renewed = clock.monotonic()
    assert callbacks.calls == ["started"]

    clock.advance(0.5)
    api.hang("GET")
    round_thread = in_background(lead)
    assert api.hung.wait(10)
    clock.advance(1.499)
    assert lead.is_leader, "stepped down before the deadline"
    assert callbacks.calls == ["started"]

    clock.advance(0.001)  # exactly renewed + renew_deadline
    assert clock.monotonic() == pytest.approx(renewed + CONFIG.renew_deadline)
    assert not lead.is_leader, "still leading at the renew deadline"
    assert callbacks.stopped.wait(10), "on_stopped did not fire while the round hung"
    assert round_thread.is_alive(), "the round was meant to be still stuck"
    assert callbacks.calls == ["started", "stopped"]
    assert "me could not renew within 2.0s; stepping down" in caplog.text

    api.answer()
    round_thread.join(10)
    assert not round_thread.is_alive()
    assert not lead.is_leader
    assert callbacks.calls == ["started", "stopped"], "the late round started a term"


def test_every_request_of_a_round_times_out_at_the_deadline(
    api: FakeLeaseApi, clock: FakeClock
) -> None:
    """Request timeouts are the time left before the renew deadline (a candidate's: renew_deadline)."""
    lead = elector(api, clock, Callbacks())
    assert lead.try_acquire_or_renew()  # GET (404), then POST
    assert [(c.method, c.timeout) for c in api.calls] == [
        ("GET", CONFIG.renew_deadline),
        ("POST", CONFIG.renew_deadline),
    ]
    api.calls.clear()

    clock.advance(1.5)
    api.hang("GET")
    round_thread = in_background(lead)
    assert api.hung.wait(10)
    clock.advance(0.25)  # the GET took 0.25 s: the PUT gets what is left
    api.answer()
    round_thread.join(10)
    assert lead.is_leader
    (get, put) = api.calls
    assert (get.method, put.method) == ("GET", "PUT")
    assert get.timeout == pytest.approx(0.5)
    assert put.timeout == pytest.approx(0.25)


def test_a_request_with_no_time_left_is_not_sent(api: FakeLeaseApi, clock: FakeClock) -> None:
    """A round that reaches the deadline before its PUT sends no PUT and does not renew."""
    callbacks = Callbacks()
    lead = elector(api, clock, callbacks)
    assert lead.try_acquire_or_renew()
    api.calls.clear()
    api.hang("GET")
    round_thread = in_background(lead)
    assert api.hung.wait(10)
    clock.advance(CONFIG.renew_deadline)
    assert callbacks.stopped.wait(10)
    api.answer()
    round_thread.join(10)
    assert [c.method for c in api.calls] == ["GET"]
    assert not lead.is_leader


def test_a_renewal_that_returns_after_the_deadline_does_not_count(
    api: FakeLeaseApi, clock: FakeClock
) -> None:
    """The PUT went through but came back renew_deadline after its round began: no term from it."""
    callbacks = Callbacks()
    lead = elector(api, clock, callbacks)
    assert lead.try_acquire_or_renew()
    clock.advance(1.0)
    api.hang("PUT")
    round_thread = in_background(lead)
    assert api.hung.wait(10)
    clock.advance(1.0)
    assert callbacks.stopped.wait(10)
    clock.advance(1.0)  # the round began 2 s ago: what it wrote may have expired for others
    api.answer()
    round_thread.join(10)
    assert not lead.is_leader
    assert callbacks.calls == ["started", "stopped"]
    assert api.lease(LEASE)["spec"]["holderIdentity"] == "me"

    assert lead.try_acquire_or_renew(), "the holder may renew its own lease at once"
    assert callbacks.calls == ["started", "stopped", "started"]


def test_a_round_stuck_past_the_old_deadline_may_still_start_a_term(
    api: FakeLeaseApi, clock: FakeClock
) -> None:
    """A renewal that began before the deadline and lands within renew_deadline of its start
    leads again until start + renew_deadline: others wait lease_duration from its write."""
    callbacks = Callbacks()
    lead = elector(api, clock, callbacks)
    assert lead.try_acquire_or_renew()
    clock.advance(1.0)
    began = clock.monotonic()
    api.hang("PUT")
    round_thread = in_background(lead)
    assert api.hung.wait(10)
    clock.advance(1.5)
    assert callbacks.stopped.wait(10)
    api.answer()
    round_thread.join(10)
    assert callbacks.calls == ["started", "stopped", "started"]
    assert lead.is_leader
    clock.advance(began + CONFIG.renew_deadline - clock.monotonic())
    assert not lead.is_leader


def test_renewing_in_time_keeps_leading_and_moves_the_deadline(
    api: FakeLeaseApi, clock: FakeClock
) -> None:
    """Rounds every retry period keep one term going well past the first deadline."""
    callbacks = Callbacks()
    lead = elector(api, clock, callbacks)
    for _ in range(10):
        assert lead.try_acquire_or_renew()
        clock.advance(CONFIG.retry_period)
        assert lead.is_leader
    assert callbacks.calls == ["started"]
    clock.advance(CONFIG.renew_deadline - CONFIG.retry_period)
    assert not lead.is_leader
    assert callbacks.stopped.wait(10)


def test_a_follower_waits_out_the_lease_then_takes_it(api: FakeLeaseApi, clock: FakeClock) -> None:
    """Another holder's record must stay unchanged for lease_duration on our clock."""
    other = leaderelection.LeaderElector(
        api, dataclasses.replace(CONFIG, identity="other"), clock=clock
    )
    assert other.try_acquire_or_renew()
    callbacks = Callbacks()
    follower = elector(api, clock, callbacks)
    assert not follower.try_acquire_or_renew()
    assert follower.observed_holder == "other"
    clock.advance(CONFIG.lease_duration - 0.01)
    assert not follower.try_acquire_or_renew()
    assert not other.is_leader  # past its own renew deadline long before
    clock.advance(0.01)
    assert follower.try_acquire_or_renew()
    lease = api.lease(LEASE)["spec"]
    assert (lease["holderIdentity"], lease["leaseTransitions"]) == ("me", 1)
