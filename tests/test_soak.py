"""The chaos soak's short variant (bench/soak.py): every fault once, every target met."""

from __future__ import annotations

import pytest

from bench import _soakcluster, _soakfaults, soak

pytestmark = [pytest.mark.slow, pytest.mark.controlplane]


def test_a_short_soak_meets_every_target() -> None:
    """About 5 minutes of faults on the local cluster, the 60 s outage and the leader's
    partition among them: no crash, no eviction on bad data or without the lease, never
    two leaders, every agent kill inside a flush losing at most that flush's samples,
    leaders and reports back in time, memory flat."""
    results = soak.run(soak.SHORT, 18, real=False)
    numbers, details = results["numbers"], results["details"]
    assert sorted(details["faults_done"]) == sorted(_soakfaults.KINDS), results["log"]
    failed = {key: numbers[key] for key, ok in results["met"].items() if not ok}
    assert not failed, (failed, details, results["log"])
    # The targets are about something: the descheduler evicted, a leader was killed and
    # replaced, the agents came back after both outages, a kill -9 was measured.
    assert numbers["evictions_total"] > 0, details
    assert details["leader_regain_seconds"], details
    assert details["partition_takeover_seconds"], details  # the follower took over
    assert max(details["outage_seconds"]) >= _soakfaults.OUTAGE, details
    assert len(details["republish_after_outage"]) >= 3, details
    # One kill, inside a flush: it cost that flush's batch (fewer would mean it missed).
    batch = round(_soakcluster.FLUSH_INTERVAL / _soakcluster.COLLECT_INTERVAL)
    assert [kill["samples"] >= batch - 1 for kill in details["agent_kills"]] == [True], details
