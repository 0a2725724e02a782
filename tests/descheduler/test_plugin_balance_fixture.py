"""The four upstream balance plugins over tests/fixtures/descheduler/snapshot-balance.yaml.

The snapshot is read as `simulate` reads it: a `kind: List` file handed to
`StaticSource.from_objects`. Each plugin runs alone, then all four in one
profile, where later plugins see the moves projected by earlier ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from descheduler import framework, plugins
from descheduler.framework import CycleReport
from tests.descheduler import fakes

FIXTURE = Path(__file__).parents[1] / "fixtures" / "descheduler" / "snapshot-balance.yaml"
ARGS: dict[str, dict[str, Any]] = {
    "RemoveDuplicates": {},
    "RemovePodsViolatingTopologySpreadConstraint": {},
    "LowNodeUtilization": {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 70}},
    "HighNodeUtilization": {"thresholds": {"cpu": 20}},
}
EXPORTER = "kube-system/node-exporter-{}x7k2"


def run(names: list[str], **top: Any) -> tuple[CycleReport, fakes.FakeBackend]:
    """One cycle over the fixture with `names` enabled at balance, in that order.

    The per-node cap is set here (5, nodeqos's default) so the expectations do
    not hang on the configuration defaults.
    """
    top.setdefault("maxNoOfPodsToEvictPerNode", 5)
    items = yaml.safe_load(FIXTURE.read_text())["items"]
    raw = fakes.policy(
        profiles=[
            {
                "name": "fixture",
                "plugins": {"balance": {"enabled": names}},
                "pluginConfig": [{"name": n, "args": ARGS[n]} for n in names],
            }
        ],
        **top,
    )
    h = fakes.harness(raw, plugins.registry(), framework.StaticSource.from_objects(items))
    return h.runner.run_once(), h.backend


def moves(report: CycleReport) -> list[tuple[str, str]]:
    return [(e.pod, e.node) for e in report.evictions]


def skips(report: CycleReport) -> list[tuple[str, str]]:
    return [(s.pod, s.reason_code.value) for s in report.skipped]


def cpu(report: CycleReport) -> dict[str, tuple[int, int]]:
    return {p.node: (p.requests_before.cpu, p.requests_after.cpu) for p in report.projections}


@pytest.mark.parametrize(
    ("plugin", "evicted", "skipped", "projected"),
    [
        pytest.param(
            "RemoveDuplicates",
            [
                ("batch/report-5f6c7b-6hn2d", "worker-1"),
                ("batch/report-5f6c7b-9qr4w", "worker-1"),
                ("shop/cart-7d9f8b6c5-2bq4z", "worker-1"),
                ("shop/cart-7d9f8b6c5-5kx8m", "worker-1"),
                ("web/frontend-6b7c9d-4fj8k", "worker-1"),
            ],
            [],
            {
                "worker-1": (3550, 1550),
                "worker-2": (650, 1550),
                "worker-3": (450, 1150),
                "worker-4": (50, 450),
            },
            id="remove-duplicates",
        ),
        pytest.param(
            "RemovePodsViolatingTopologySpreadConstraint",
            [("web/frontend-6b7c9d-4fj8k", "worker-1"), ("web/frontend-6b7c9d-7mz2x", "worker-1")],
            [],
            {"worker-1": (3550, 3150), "worker-3": (450, 850)},
            id="topology-spread",
        ),
        pytest.param(
            "LowNodeUtilization",
            [("batch/report-5f6c7b-6hn2d", "worker-1"), ("batch/report-5f6c7b-9qr4w", "worker-1")],
            [(EXPORTER.format("a"), "filtered")],
            {"worker-1": (3550, 2150), "worker-3": (450, 1150), "worker-4": (50, 750)},
            id="low-node-utilization",
        ),
        pytest.param(
            "HighNodeUtilization",
            [("shop/cart-7d9f8b6c5-q9l3s", "worker-3"), ("web/frontend-6b7c9d-w5c3h", "worker-3")],
            [
                (EXPORTER.format("d"), "filtered"),
                (EXPORTER.format("c"), "filtered"),
                (EXPORTER.format("b"), "filtered"),
                ("shop/cart-7d9f8b6c5-hr6vj", "no_fit"),
                ("web/frontend-6b7c9d-g8v1n", "no_fit"),
                ("web/frontend-6b7c9d-k2p6r", "no_fit"),
            ],
            {"worker-1": (3550, 3950), "worker-3": (450, 50)},
            id="high-node-utilization",
        ),
    ],
)
def test_each_plugin_alone(
    plugin: str,
    evicted: list[tuple[str, str]],
    skipped: list[tuple[str, str]],
    projected: dict[str, tuple[int, int]],
) -> None:
    """Each plugin alone over the fixture: exact evictions, reasons and projected requests."""
    report, _ = run([plugin])
    assert moves(report) == evicted
    assert skips(report) == skipped
    assert cpu(report) == projected
    assert report.failures == ()


def test_all_four_in_one_profile_see_each_others_moves() -> None:
    """In order: duplicates first; topology spread then counts the frontend pod moved to z2."""
    report, _ = run(list(ARGS))
    by_plugin = [(e.plugin, e.pod) for e in report.evictions]
    assert by_plugin == [
        ("RemoveDuplicates", "batch/report-5f6c7b-6hn2d"),
        ("RemoveDuplicates", "batch/report-5f6c7b-9qr4w"),
        ("RemoveDuplicates", "shop/cart-7d9f8b6c5-2bq4z"),
        ("RemoveDuplicates", "shop/cart-7d9f8b6c5-5kx8m"),
        ("RemoveDuplicates", "web/frontend-6b7c9d-4fj8k"),
        # z1 4 / z2 2 after the projected move: one more, worker-1 is at its limit of 5
        ("RemovePodsViolatingTopologySpreadConstraint", "web/frontend-6b7c9d-g8v1n"),
    ]
    assert skips(report) == [
        ("web/frontend-6b7c9d-7mz2x", "limit_reached"),
        ("web/frontend-6b7c9d-b3t9q", "limit_reached"),
        (EXPORTER.format("d"), "filtered"),
    ]
    assert [(n.plugin, n.reason.value) for n in report.notes] == [
        ("LowNodeUtilization", "not_source")
    ]
    assert cpu(report) == {
        "worker-1": (3550, 1550),
        "worker-2": (650, 1350),
        "worker-3": (450, 1350),
        "worker-4": (50, 450),
    }


def test_dry_run_decides_the_same_without_writes() -> None:
    """dryRun: the same pods are chosen for every plugin and the backend is never called."""
    real, real_backend = run(list(ARGS))
    dry, dry_backend = run(list(ARGS), dryRun=True)
    assert moves(dry) == moves(real)
    assert skips(dry) == skips(real)
    assert dry_backend.calls == []
    assert len(real_backend.calls) == len(real.evictions)
