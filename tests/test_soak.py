"""The chaos soak's short variant (bench/soak.py): every fault kind once, every target met."""

from __future__ import annotations

import pytest

from bench import soak

pytestmark = [pytest.mark.slow, pytest.mark.controlplane]


def test_a_short_soak_meets_every_target() -> None:
    """~4 minutes of faults on the local cluster: no crash, no eviction on bad data or
    without the lease, leaders and reports back in time, memory flat."""
    results = soak.run(240, 18, real=False)
    details = results["details"]
    assert details["faults_not_reached"] == [], results["log"]
    failed = {key: results["numbers"][key] for key, ok in results["met"].items() if not ok}
    assert not failed, (failed, details)
    # The targets are about something: the descheduler evicted, a leader was killed and
    # replaced, the agents came back after an outage, a kill -9 was measured.
    assert results["numbers"]["evictions_total"] > 0, details
    assert details["leader_regain_seconds"], details
    assert len(details["republish_after_outage"]) >= 3, details
    assert details["samples_lost"], details
