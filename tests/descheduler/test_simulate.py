"""`nodeqos-descheduler simulate`: one dry-run cycle over a snapshot file, explained.

The fixture is SCENARIOS.md D1 as `kubectl get -o yaml` would print it (see
its header). What is asserted here holds whatever plugins exist; the
LowNodeLoad outcome has its own test below.
"""

from __future__ import annotations

import json
import pathlib
import textwrap
from datetime import UTC, datetime
from typing import Any

import yaml
from click.testing import CliRunner, Result

from descheduler import cli, config, framework, plugins
from descheduler.app import render, simulate, snapshotfile
from descheduler.config import ExtensionPoint, PluginArgs
from descheduler.framework import Handle, Snapshot
from tests.descheduler import fakes

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures" / "descheduler"
SNAPSHOT = FIXTURES / "snapshot-lownodeload.yaml"
NOW = "2024-05-01T12:00:00Z"
EVICTOR_ONLY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
profiles:
- name: p
"""
LOWNODELOAD_D1 = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
profiles:
- name: loadaware
  plugins:
    balance:
      enabled: [{name: LowNodeLoad}]
  pluginConfig:
  - name: LowNodeLoad
    args:
      lowThresholds: {cpu: 30}
      highThresholds: {cpu: 70}
      anomalyCondition: {consecutiveAbnormalities: 1}
"""


def yaml_config(text: str) -> dict[str, Any]:
    parsed: dict[str, Any] = yaml.safe_load(text)
    return parsed


def write(tmp_path: pathlib.Path, name: str, text: str) -> pathlib.Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli.main, list(args))


def simulate_json(config_file: pathlib.Path, *extra: str) -> dict[str, Any]:
    result = invoke(
        "simulate", "--config", str(config_file), "--snapshot", str(SNAPSHOT), "--now", NOW,
        "-o", "json", *extra,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def nodes(body: dict[str, Any]) -> dict[str, tuple[str, dict[str, float], dict[str, float]]]:
    return {n["name"]: (n["basis"], n["before"], n["after"]) for n in body["nodes"]}


def test_json_without_balance_plugins_reports_nodes_and_no_evictions(
    tmp_path: pathlib.Path,
) -> None:
    """DefaultEvictor only: nothing to evict; every node's measured usage is reported."""
    body = simulate_json(write(tmp_path, "c.yaml", EVICTOR_ONLY))
    assert body["dryRun"] is True
    assert body["now"] == "2024-05-01T12:00:00+00:00"
    assert (body["evictions"], body["skipped"], body["notes"], body["failures"]) == ([], [], [], [])
    assert nodes(body) == {
        "node-a": ("usage", {"cpu": 92.5, "memory": 10.0}, {"cpu": 92.5, "memory": 10.0}),
        "node-b": ("usage", {"cpu": 10.0, "memory": 10.0}, {"cpu": 10.0, "memory": 10.0}),
        "node-c": ("usage", {"cpu": 50.0, "memory": 10.0}, {"cpu": 50.0, "memory": 10.0}),
    }
    node_a = next(n for n in body["nodes"] if n["name"] == "node-a")
    assert node_a["requests"]["before"]["cpu"] == 93.8  # 3700m + the DaemonSet pod's 50m
    assert node_a["considered"] is True
    assert body["skippedKinds"] == {"Service": 1}


def test_table_lists_every_node(tmp_path: pathlib.Path) -> None:
    """The default output is a table: nodes with bars, then decisions and a summary."""
    config_file = write(tmp_path, "c.yaml", EVICTOR_ONLY)
    result = invoke(
        "simulate", "--config", str(config_file), "--snapshot", str(SNAPSHOT), "--now", NOW
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "Simulated descheduling cycle at 2024-05-01T12:00:00+00:00 (dry run: nothing is evicted)"
    )
    row_a = next(line for line in lines if line.strip().startswith("node-a"))
    assert row_a.split() == [
        "node-a", "usage", "92.5", "[#########.]", "->", "92.5", "[#########.]",
        "10.0", "[#.........]", "->", "10.0", "[#.........]",
    ]  # fmt: skip
    assert any(line.strip().startswith("node-c") for line in lines)
    assert "  (no candidates)" in lines
    assert lines[-1] == "0 would be evicted, 0 passed over, 0 plugin errors"


class HottestFirst:
    """Test balance plugin: one eviction from the node requesting most CPU, largest pod first."""

    def __init__(self, args: PluginArgs, handle: Handle) -> None:
        self.handle = handle

    def balance(self, snapshot: Snapshot) -> None:
        evictor = self.handle.evictor
        hottest = max(snapshot.nodes, key=lambda n: snapshot.requested(n.name).cpu)
        candidates = evictor.evictable(snapshot.pods_on(hottest.name), plugin="HottestFirst")
        for pod in sorted(candidates, key=lambda p: -p.requests.cpu):
            if evictor.evict(pod, plugin="HottestFirst", reason=f"{hottest.name} is hot"):
                return


def with_hottest_first() -> framework.Registry:
    registry = plugins.registry()
    registry.register(
        "HottestFirst",
        HottestFirst,
        args=fakes.NoArgs,
        extension_points=frozenset({ExtensionPoint.BALANCE}),
    )
    return registry


def test_every_candidate_gets_a_decision_and_a_reason() -> None:
    """Evicted in order, PDB-blocked (predicted) and filtered pods, each with its reason."""
    registry = with_hottest_first()
    cfg = config.decode_configuration(
        fakes.policy(balance=["HottestFirst"]), plugins=registry.catalog()
    )
    snapshot = snapshotfile.load(SNAPSHOT)
    now = datetime(2024, 5, 1, 12, tzinfo=UTC)
    result = simulate.run(cfg, snapshot.source, registry, now=now)
    body = result.to_dict()
    assert body["evictions"] == [
        {
            "pod": "default/a-1000",
            "node": "node-a",
            "plugin": "HottestFirst",
            "profile": "p1",
            "reason": "node-a is hot",
        }
    ]
    assert [(s["pod"], s["reason"], s["plugin"]) for s in body["skipped"]] == [
        ("default/agent-a", "filtered", "HottestFirst"),
        ("default/a-1200", "pdb_blocked", "HottestFirst"),
    ]
    assert body["skipped"][0]["detail"] == "DefaultEvictor: DaemonSet pod"
    assert "disruption budget a-1200 (predicted)" in body["skipped"][1]["detail"]
    by_name = {n["name"]: n for n in body["nodes"]}
    # measured usage: the evicted pod's reported 1000m leaves node-a; no node gains it
    assert by_name["node-a"]["after"] == {"cpu": 67.5, "memory": 10.0}
    assert by_name["node-a"]["requests"]["after"]["cpu"] == 68.8
    assert by_name["node-b"]["after"] == by_name["node-b"]["before"]

    text = render.table(result)
    lines = text.splitlines()
    start = lines.index("DECISIONS")
    assert [line.split(None, 4) for line in lines[start + 1 : start + 5]] == [
        ["POD", "NODE", "PLUGIN", "DECISION", "REASON"],
        ["default/a-1000", "node-a", "HottestFirst", "evicted", "node-a is hot"],
        ["default/agent-a", "node-a", "HottestFirst", "filtered", "DefaultEvictor: DaemonSet pod"],
        ["default/a-1200", "node-a", "HottestFirst", "pdb_blocked", body["skipped"][1]["detail"]],
    ]
    assert lines[-1] == "1 would be evicted, 2 passed over, 0 plugin errors"


def test_lownodeload_d1_through_simulate(tmp_path: pathlib.Path) -> None:
    """D1 via simulate: exactly a-1000 goes; node-a is projected at 67.5%, node-b at 35%."""
    body = simulate_json(write(tmp_path, "c.yaml", LOWNODELOAD_D1))
    assert [(e["pod"], e["node"], e["plugin"]) for e in body["evictions"]] == [
        ("default/a-1000", "node-a", "LowNodeLoad")
    ]
    assert nodes(body) == {
        "node-a": ("usage", {"cpu": 92.5, "memory": 10.0}, {"cpu": 67.5, "memory": 10.0}),
        "node-b": ("usage", {"cpu": 10.0, "memory": 10.0}, {"cpu": 35.0, "memory": 10.0}),
        "node-c": ("usage", {"cpu": 50.0, "memory": 10.0}, {"cpu": 50.0, "memory": 10.0}),
    }


def test_node_rows_count_only_pods_still_bound() -> None:
    """simulate's NodeMetric reading leaves out the entry of a pod no longer on the node."""
    from tests import builders

    source = framework.StaticSource(
        nodes=[builders.make_node("n1")],
        pods=[builders.make_pod("stay", node="n1")],
        node_metrics=[builders.make_nodemetric("n1", pods={"stay": 1000, "gone": 2000})],
    )
    cfg = config.decode_configuration(fakes.policy(), plugins=plugins.registry().catalog())
    now = datetime(2024, 5, 1, 12, 0, 30, tzinfo=UTC)
    result = simulate.run(cfg, source, plugins.registry(), now=now)
    [row] = result.nodes
    assert (row.basis, row.before["cpu"], row.after["cpu"]) == ("usage", 25.0, 25.0)


def test_a_hot_node_left_hot_is_a_note_naming_it() -> None:
    """simulate JSON: the hot node with no destination gets a note with its name and reason."""
    from tests import builders

    source = framework.StaticSource(
        nodes=[builders.make_node("hot"), builders.make_node("warm")],
        pods=[builders.make_pod("h", node="hot"), builders.make_pod("w", node="warm")],
        node_metrics=[
            builders.make_nodemetric("hot", pods={"h": 3700}),
            builders.make_nodemetric("warm", pods={"w": 2000}),
        ],
    )
    cfg = config.decode_configuration(
        yaml_config(LOWNODELOAD_D1), plugins=plugins.registry().catalog()
    )
    now = datetime(2024, 5, 1, 12, 0, 30, tzinfo=UTC)
    body = simulate.run(cfg, source, plugins.registry(), now=now).to_dict()
    assert [(n["reason"], n["node"]) for n in body["notes"]] == [
        ("no_destination", ""),
        ("no_destination", "hot"),
    ]


def test_config_may_come_before_the_subcommand(tmp_path: pathlib.Path) -> None:
    """`--config X simulate ...` works as well as `simulate --config X ...`."""
    config_file = write(tmp_path, "c.yaml", EVICTOR_ONLY)
    result = invoke(
        "--config", str(config_file), "simulate", "--snapshot", str(SNAPSHOT), "--now", NOW,
        "-o", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["nodes"]) == 3


def test_migration_controller_ignored_args_are_warned_about(tmp_path: pathlib.Path) -> None:
    """A Koordinator file configuring MigrationController without enabling it: a warning."""
    config_file = write(
        tmp_path,
        "c.yaml",
        EVICTOR_ONLY + "  pluginConfig:\n  - name: MigrationController\n    args: {}\n",
    )
    body = simulate_json(config_file)
    (warning,) = body["warnings"]
    assert "pluginConfig for MigrationController is ignored" in warning
