"""Every upstream plugin through the real `simulate` command, on the snapshot fixtures.

`simulate` must reach exactly the decisions the framework reaches in-process
(the fixture tests of each plugin pin those down); here the command itself runs
with all six Deschedule plugins, then all four Balance plugins, in one profile.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from descheduler import cli, framework, plugins
from tests.descheduler import fakes

FIXTURES = Path(__file__).parents[1] / "fixtures" / "descheduler"
DAY = 86_400
DESCHEDULE: dict[str, dict[str, Any]] = {
    "RemovePodsViolatingNodeAffinity": {
        "nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]
    },
    "RemovePodsViolatingNodeTaints": {},
    "RemovePodsViolatingInterPodAntiAffinity": {},
    "RemovePodsHavingTooManyRestarts": {"podRestartThreshold": 10},
    "PodLifeTime": {"maxPodLifeTimeSeconds": 7 * DAY},
    "RemoveFailedPods": {},
}
BALANCE: dict[str, dict[str, Any]] = {
    "RemoveDuplicates": {},
    "RemovePodsViolatingTopologySpreadConstraint": {},
    "LowNodeUtilization": {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 70}},
    "HighNodeUtilization": {"thresholds": {"cpu": 20}},
}


def config(point: str, args: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return fakes.policy(
        profiles=[
            {
                "name": "fixture",
                "plugins": {point: {"enabled": list(args)}},
                "pluginConfig": [{"name": n, "args": a} for n, a in args.items()],
            }
        ],
        maxNoOfPodsToEvictPerNode=5,
    )


@pytest.mark.parametrize(
    ("snapshot", "point", "args"),
    [
        pytest.param("snapshot-deschedule.yaml", "deschedule", DESCHEDULE, id="deschedule-plugins"),
        pytest.param("snapshot-balance.yaml", "balance", BALANCE, id="balance-plugins"),
    ],
)
def test_simulate_matches_the_framework(
    tmp_path: Path, snapshot: str, point: str, args: dict[str, dict[str, Any]]
) -> None:
    """The command's JSON evictions equal an in-process cycle's, and every plugin is exercised."""
    raw = config(point, args)
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(raw))
    now = fakes.NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    result = CliRunner().invoke(
        cli.main,
        [
            "--config",
            str(config_file),
            "simulate",
            "--snapshot",
            str(FIXTURES / snapshot),
            "--now",
            now,
            "--output",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    simulated = json.loads(result.stdout)

    items = yaml.safe_load((FIXTURES / snapshot).read_text())["items"]
    h = fakes.harness(
        {**raw, "dryRun": True}, plugins.registry(), framework.StaticSource.from_objects(items)
    )
    report = h.runner.run_once()

    assert len(simulated["evictions"]) >= len(args) - 2
    assert [(e["pod"], e["plugin"]) for e in simulated["evictions"]] == [
        (e.pod, e.plugin) for e in report.evictions
    ]
    assert {e["plugin"] for e in simulated["evictions"]} | {n.plugin for n in report.notes} >= set(
        args
    ) - {"HighNodeUtilization"}
    assert {n["name"] for n in simulated["nodes"]} >= {
        n["metadata"]["name"] for n in items if n["kind"] == "Node"
    }
