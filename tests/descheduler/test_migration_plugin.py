"""MigrationController in the framework without a cluster: start-up rules and the offline filter.

Offline (no API client: `simulate`, the daemon's start-up check) the plugin
builds, and its filter runs the same checks and limits over the snapshot
alone: expected replicas are the pods a controller has, and this cycle's
evictions are the migrations in flight.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from descheduler import framework
from descheduler.framework import Handle, Reason, Snapshot
from descheduler.plugins import migrationcontroller
from tests import builders
from tests.descheduler import fakes

NO_RATE_LIMIT = {"objectLimiters": {"workload": {"duration": "0s"}}}


def koordinator(args: dict[str, Any] | None, **top: Any) -> dict[str, Any]:
    """A Koordinator file: EvictAll balancing, MigrationController at filter and evict."""
    profile: dict[str, Any] = {
        "name": "koord",
        "plugins": {
            "balance": {"enabled": [{"name": "EvictAll"}]},
            "filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "MigrationController"}]},
            "preEvictionFilter": {"disabled": [{"name": "*"}]},
            "evict": {"disabled": [{"name": "*"}], "enabled": [{"name": "MigrationController"}]},
        },
    }
    if args is not None:
        profile["pluginConfig"] = [{"name": "MigrationController", "args": args}]
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerConfiguration",
        "profiles": [profile],
        **top,
    }


def run(args: dict[str, Any], pods: list[Any], **top: Any) -> framework.CycleReport:
    h = fakes.harness(
        koordinator({"defaultJobMode": "EvictDirectly", **args}, **top),
        fakes.registry_with(EvictAll=fakes.evict_all),
        framework.StaticSource(nodes=fakes.nodes("n1", "n2"), pods=pods),
    )
    return h.runner.run_once()


def replicas(owner: str, count: int, node: str = "n1", **overrides: Any) -> list[Any]:
    return [
        builders.make_pod(f"{owner}-{i}", node=node, owner_name=owner, **overrides)
        for i in range(count)
    ]


def test_reservation_first_refuses_to_start() -> None:
    """ReservationFirst (Koordinator's default, ours is EvictDirectly) is a start-up error."""
    with pytest.raises(framework.StartupError) as raised:
        fakes.harness(
            koordinator({"maxMigratingPerNode": 1, "defaultJobMode": "ReservationFirst"}),
            fakes.registry_with(EvictAll=fakes.evict_all),
            framework.StaticSource(),
        )
    assert raised.value.problems == [
        "profiles[0] (koord): plugin MigrationController: defaultJobMode ReservationFirst "
        "needs Koordinator's koord-scheduler and Reservation objects, which nodeqos does not "
        "run; set defaultJobMode: EvictDirectly"
    ]


def test_offline_dry_run_counts_the_cycles_evictions_against_the_limits() -> None:
    """4 replicas (maxUnavailable 2): two go, the rest wait; another node's pods are unaffected."""
    report = run(NO_RATE_LIMIT, [*replicas("web", 4), *replicas("api", 2, node="n2")], dryRun=True)
    assert report.evicted_pods == ["default/web-0", "default/web-1", "default/api-0"]
    waits = {s.pod: (s.reason_code, s.detail) for s in report.skipped}
    assert waits["default/web-2"][0] is Reason.LIMIT_REACHED
    assert "maxMigratingPerNode 2 reached on node n1" in waits["default/web-2"][1]
    assert waits["default/api-1"][0] is Reason.LIMIT_REACHED
    assert "maxMigratingPerWorkload 1 reached" in waits["default/api-1"][1]


def test_offline_filter_refuses_single_replicas_and_protected_pods() -> None:
    """A lone replica and a DaemonSet pod are refused, with the reason."""
    pods = [*replicas("solo", 1), builders.make_pod("ds", owner="DaemonSet")]
    report = run(NO_RATE_LIMIT, pods, dryRun=True)
    assert report.evicted_pods == []
    details = {s.pod: (s.reason_code, s.detail) for s in report.skipped}
    assert details["default/solo-0"][0] is Reason.FILTERED
    assert "expects 1 replica(s)" in details["default/solo-0"][1]
    assert "DaemonSet pod" in details["default/ds"][1]


def test_without_a_running_controller_evict_creates_nothing() -> None:
    """A real run whose controller is not running (no client, not leading): nothing is queued."""
    report = run(NO_RATE_LIMIT, replicas("web", 4))
    assert report.evicted_pods == []
    assert {s.reason_code for s in report.skipped} == {Reason.API_UNAVAILABLE}
    assert "does not lead" in report.skipped[0].detail


def test_plugin_dry_run_reports_the_eviction_without_a_client() -> None:
    """MigrationController's own dryRun: the eviction is reported, nothing is created."""
    report = run({**NO_RATE_LIMIT, "dryRun": True}, replicas("web", 4))
    assert report.evicted_pods == ["default/web-0", "default/web-1"]


def test_run_without_a_client_waits_for_stop() -> None:
    """The controller form with no client does nothing but return when stopped."""
    snapshot = Snapshot(framework.StaticSource().state(), taken_at=fakes.NOW)
    handle = Handle(
        evictor=None,  # type: ignore[arg-type]
        decisions=None,  # type: ignore[arg-type]
        clock=fakes.FixedClock(),
        snapshot=lambda: snapshot,
    )
    plugin = migrationcontroller.factory(
        migrationcontroller.Args.from_mapping({"defaultJobMode": "EvictDirectly"}), handle
    )
    stop = threading.Event()
    stop.set()
    plugin.run(stop)
    assert plugin.caches is None and plugin.controller is None
