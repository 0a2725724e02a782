"""Leader election on a Lease: exactly one leader, and a fast, safe takeover."""

from __future__ import annotations

import threading
import time

import pytest

from kube import leaderelection, rest

pytestmark = pytest.mark.controlplane


def config(identity: str, name: str, **overrides: float) -> leaderelection.Config:
    timing = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.3, **overrides}
    return leaderelection.Config(namespace="default", name=name, identity=identity, **timing)


def test_rejects_inconsistent_timing() -> None:
    """leaseDuration must exceed renewDeadline, which must exceed retryPeriod."""
    with pytest.raises(ValueError, match="leaseDuration > renewDeadline > retryPeriod"):
        config("a", "x", lease_duration=1.0, renew_deadline=2.0)


def test_exactly_one_leader_and_takeover_after_crash(kube: rest.Rest) -> None:
    """Two candidates: one leads; when it dies without releasing, the other leads within the lease duration."""
    electors = [leaderelection.LeaderElector(kube, config(who, "takeover")) for who in ("a", "b")]
    stops = [threading.Event(), threading.Event()]
    threads = [
        threading.Thread(target=e.run, args=(s,), daemon=True)
        for e, s in zip(electors, stops, strict=True)
    ]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 10
        while not any(e.is_leader for e in electors) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # several rounds: still exactly one
        leaders = [e for e in electors if e.is_leader]
        assert len(leaders) == 1
        leader = leaders[0]
        follower = electors[1 - electors.index(leader)]
        assert follower.observed_holder == leader.config.identity

        # Crash: the leader stops renewing and does not release.
        crashed_at = time.monotonic()
        leader.release = lambda: None  # type: ignore[method-assign]
        stops[electors.index(leader)].set()
        assert follower.wait_leader(timeout=10)
        took = time.monotonic() - crashed_at
        assert took <= leader.config.lease_duration + 2 * leader.config.retry_period + 0.5
        lease = kube.get("/apis/coordination.k8s.io/v1/namespaces/default/leases/takeover")
        assert lease["spec"]["holderIdentity"] == follower.config.identity
        assert lease["spec"]["leaseTransitions"] == 1
    finally:
        for stop in stops:
            stop.set()
        for thread in threads:
            thread.join(5)


def test_release_hands_over_at_once(kube: rest.Rest) -> None:
    """A leader that stops cleanly clears the holder; the successor need not wait for expiry."""
    first = leaderelection.LeaderElector(
        kube, config("first", "handover", lease_duration=30.0, renew_deadline=20.0)
    )
    assert first.try_acquire_or_renew()
    first.release()
    second = leaderelection.LeaderElector(
        kube, config("second", "handover", lease_duration=30.0, renew_deadline=20.0)
    )
    assert second.try_acquire_or_renew()
