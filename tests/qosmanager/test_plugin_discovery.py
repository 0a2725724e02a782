"""Out-of-tree QoS plugins: found through entry points, on the agent's command line, isolated."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

import agent
import qosmanager
from agent import cli
from qosmanager import discovery, plugins
from tests.qosmanager import example_plugin

ROOT = Path(__file__).resolve().parents[2]
OOT = "tests.qosmanager.outoftree"


def entry_point(name: str, value: str) -> importlib.metadata.EntryPoint:
    return importlib.metadata.EntryPoint(name, value, discovery.GROUP)


def write_dist(site: Path, dist: str, entry_points: dict[str, str]) -> None:
    """A `*.dist-info` as pip writes it, declaring `entry_points` in the QoS plugin group."""
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{discovery.GROUP}]\n{lines}")


def test_pyproject_declares_exactly_the_in_tree_table() -> None:
    """pyproject.toml's nodeqos.agent.qos_plugins entry points are qosmanager.plugins.IN_TREE."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert declared[discovery.GROUP] == dict(plugins.IN_TREE)


def test_built_ins_are_found_without_metadata_and_gated_as_built_ins() -> None:
    """With no installed entry point, every built-in strategy is registered as a built-in."""
    registry = discovery.registry(plugins.IN_TREE, entry_points=[])
    assert [(e.name, e.builtin) for e in registry] == [(name, True) for name in plugins.IN_TREE]
    defaults = {f.name: f.default for f in qosmanager.BUILTIN_FEATURES}
    assert {e.name: e.feature.default for e in registry} == defaults


def test_installed_metadata_adds_extension_plugins_and_ignores_stale_nodeqos(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another checkout's nodeqos metadata is skipped; a third party's plugin is an extension."""
    write_dist(tmp_path, "nodeqos", {"Ghost": "qosmanager.plugins.ghost"})
    write_dist(tmp_path, "be-pod-counter", {"BEPodCounter": "tests.qosmanager.example_plugin"})
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = qosmanager.plugin_registry()
    assert "Ghost" not in registry
    entry = registry.get("BEPodCounter")
    assert not entry.builtin
    assert isinstance(entry.plugin, example_plugin.BEPodCounter)
    assert entry.feature == qosmanager.Feature.of("BEPodCounter", example_plugin.FEATURE)
    assert qosmanager.plugin_registry().get("BEPodCounter").plugin is not entry.plugin


@pytest.mark.parametrize(
    ("found", "error"),
    [
        pytest.param(
            entry_point("Broken", f"{OOT}.brokenimport"),
            "ImportError: No module named 'somedependency'",
            id="import-raises",
        ),
        pytest.param(
            entry_point("NoFeature", f"{OOT}.nofeature"),
            "ValueError: QoS plugin NoFeature (entry point NoFeature = "
            f"{OOT}.nofeature of an unknown distribution) must export FEATURE,"
            " a qosmanager.FeatureSpec",
            id="surface-incomplete",
        ),
        pytest.param(
            entry_point("CPUBurst", "tests.qosmanager.example_plugin"),
            "QoS plugin CPUBurst is declared by nodeqos (in-tree) and by an unknown distribution",
            id="name-taken",
        ),
    ],
)
def test_a_broken_plugin_is_recorded_and_cannot_be_enabled(
    found: importlib.metadata.EntryPoint, error: str
) -> None:
    """Discovery carries on; the plugin has no flags and enabling its gate says why."""
    registry = discovery.registry(plugins.IN_TREE, entry_points=[found])
    assert list(registry.broken()) == [found.name]
    assert error in registry.broken()[found.name]
    assert found.name not in registry
    assert registry.extension_gates(f"{found.name}=false").as_dict() == {}
    with pytest.raises(ValueError, match=f"QoS plugin '{found.name}' cannot be enabled: "):
        registry.extension_gates(f"{found.name}=true")


def test_qos_plugins_passed_in_show_in_help_and_gates() -> None:
    """build_command(qos_plugins=[module]): the plugin's flag and its gate are in --help."""
    result = CliRunner().invoke(cli.build_command(qos_plugins=[example_plugin]), ["--help"])
    assert result.exit_code == 0, result.output
    assert "--be-pod-counter-interval" in result.output
    assert "known: BEPodCounter" in result.output


def test_enabling_an_uninstalled_plugin_names_the_entry_point_group() -> None:
    """--qos-extension-plugins=Nope=true: exit 2, the known gates and where plugins come from."""
    result = CliRunner().invoke(
        cli.build_command(), ["--standalone", "--qos-extension-plugins=Nope=true"]
    )
    assert result.exit_code == 2, result.output
    assert "unknown feature gate 'Nope'" in result.output
    assert '"nodeqos.agent.qos_plugins"' in result.output


def test_agent_run_composes_an_agent_with_qos_plugins_passed_in(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """agent.run(["--help"], qos_plugins=[module]) shows the plugin's flag; the stock one does not."""
    with pytest.raises(SystemExit) as composed:
        agent.run(["--help"], qos_plugins=[example_plugin])
    assert composed.value.code == 0
    assert "--be-pod-counter-interval" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        agent.run(["--help"])
    assert "--be-pod-counter-interval" not in capsys.readouterr().out
