"""Out-of-tree descheduler plugins: found through entry points, configured, isolated, vetoing."""

from __future__ import annotations

import importlib.metadata
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import descheduler
from descheduler import cli, config, framework, plugins
from descheduler.framework import Reason, discovery
from tests import builders
from tests.descheduler import fakes
from tests.descheduler.outoftree import keeplabelled

ROOT = Path(__file__).resolve().parents[2]
OOT = "tests.descheduler.outoftree"


def entry_point(name: str, module: str) -> importlib.metadata.EntryPoint:
    return importlib.metadata.EntryPoint(name, f"{OOT}.{module}", discovery.GROUP)


def write_dist(site: Path, dist: str, entry_points: dict[str, str]) -> None:
    """A `*.dist-info` as pip writes it, declaring `entry_points` in the plugin group."""
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{discovery.GROUP}]\n{lines}")


def profile(name: str, **plugin_sets: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "plugins": {point: {"enabled": names} for point, names in plugin_sets.items()},
    }


def test_pyproject_declares_exactly_the_in_tree_table() -> None:
    """pyproject.toml's nodeqos.descheduler.plugins entry points are plugins.IN_TREE."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert declared[discovery.GROUP] == dict(plugins.IN_TREE)


def test_in_tree_plugins_are_found_without_any_metadata() -> None:
    """With no installed entry point at all, every in-tree plugin is registered with its factory."""
    registry = discovery.registry(plugins.IN_TREE, entry_points=[])
    assert set(registry) == set(plugins.IN_TREE)
    assert registry.implemented() == sorted(plugins.IN_TREE)
    assert registry.broken() == {}


def test_installed_metadata_adds_other_packages_and_ignores_stale_nodeqos(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another checkout's nodeqos metadata (a Ghost plugin) is skipped; a third party's is added."""
    write_dist(tmp_path, "nodeqos", {"Ghost": "descheduler.plugins.ghost"})
    write_dist(tmp_path, "nodeqos-keeplabelled", {"KeepLabelled": f"{OOT}.keeplabelled"})
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = plugins.registry()
    assert "Ghost" not in registry
    assert set(plugins.IN_TREE) < set(registry)
    entry = registry.entry("KeepLabelled")
    assert entry.spec.args is keeplabelled.Args
    assert entry.factory is keeplabelled.factory


def test_out_of_tree_filter_vetoes_evictions() -> None:
    """A Filter plugin passed in keeps its labelled pod; the unlabelled one is evicted."""
    registry = fakes.registry_with(EvictAll=fakes.evict_all)
    discovery.register_object(registry, keeplabelled, where="test")
    raw = fakes.policy(
        profiles=[
            {
                **profile("p1", balance=["EvictAll"], filter=["KeepLabelled"]),
                "pluginConfig": [{"name": "KeepLabelled", "args": {"label": "keep"}}],
            }
        ]
    )
    source = framework.StaticSource(
        nodes=fakes.nodes("n1", "n2"),
        pods=[
            builders.make_pod("kept", node="n1", labels={"keep": "true"}),
            builders.make_pod("moved", node="n1"),
        ],
    )
    report = fakes.harness(raw, registry, source).runner.run_once()
    assert [e.pod for e in report.evictions] == ["default/moved"]
    (skip,) = report.skipped
    assert (skip.pod, skip.reason_code) == ("default/kept", Reason.FILTERED)
    assert skip.detail == "KeepLabelled: pod is labelled keep=true"


def test_out_of_tree_args_get_field_paths_and_exit_2(tmp_path: Path) -> None:
    """Unknown and missing fields of an out-of-tree plugin's args: every path listed, status 2."""
    text = textwrap.dedent(
        """\
        apiVersion: descheduler/v1alpha2
        kind: DeschedulerConfiguration
        profiles:
        - name: p1
          plugins:
            filter: {enabled: [{name: KeepLabelled}]}
          pluginConfig:
          - name: KeepLabelled
            args: {lable: keep, value: 3}
        """
    )
    registry = plugins.registry([keeplabelled], installed=False)
    with pytest.raises(config.ConfigError) as caught:
        config.load_config(text, plugins=registry.catalog())
    where = "profiles[0].pluginConfig[KeepLabelled].args"
    assert [str(e) for e in caught.value.errors] == [
        f'{where}.lable: unknown field (did you mean "label"?)',
        f"{where}.value: must be a string, not a number",
        f"{where}.label: required: the label whose pods are never evicted",
    ]
    path = tmp_path / "c.yaml"
    path.write_text(text)
    result = CliRunner().invoke(
        cli.main, ["--config", str(path), "--validate"], obj=cli.Session(registry)
    )
    assert result.exit_code == 2, result.output
    assert f'{where}.lable: unknown field (did you mean "label"?)' in result.stderr


def test_uninstalled_plugin_fails_naming_it_and_the_group(tmp_path: Path) -> None:
    """A profile naming a plugin nobody installed: exit 2, the name and the entry-point group."""
    path = tmp_path / "c.yaml"
    path.write_text(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"
        "profiles:\n- name: p1\n  plugins:\n    filter: {enabled: [{name: KeepLabelled}]}\n"
    )
    result = CliRunner().invoke(cli.main, ["--config", str(path), "--validate"])
    assert result.exit_code == 2, result.output
    assert 'unknown plugin "KeepLabelled"' in result.stderr
    assert 'entry point "KeepLabelled" in group "nodeqos.descheduler.plugins"' in result.stderr


@pytest.mark.parametrize(
    ("found", "error"),
    [
        pytest.param(
            entry_point("BrokenImport", "brokenimport"),
            "entry point BrokenImport = tests.descheduler.outoftree.brokenimport of an unknown"
            " distribution cannot be loaded: ImportError: No module named 'somedependency'",
            id="import-raises",
        ),
        pytest.param(
            entry_point("Keep", "keeplabelled"),
            "entry point Keep = tests.descheduler.outoftree.keeplabelled of an unknown distribution"
            " cannot be loaded: RegistryError: the entry point's name must be the plugin's NAME"
            " (got 'KeepLabelled')",
            id="name-mismatch",
        ),
        pytest.param(
            entry_point("LowNodeLoad", "keeplabelled"),
            "descheduler plugin LowNodeLoad is declared by nodeqos (in-tree) and by an unknown"
            " distribution; uninstall one of them",
            id="name-taken",
        ),
    ],
)
def test_a_broken_entry_point_is_recorded_not_raised(
    found: importlib.metadata.EntryPoint, error: str
) -> None:
    """Discovery carries on past a plugin it cannot load and says why, by name."""
    registry = discovery.registry(plugins.IN_TREE, entry_points=[found])
    assert registry.broken() == {found.name: error}
    assert set(plugins.IN_TREE) - {found.name} <= set(registry.implemented())


@pytest.mark.parametrize(
    ("name", "phase", "error"),
    [
        pytest.param("BrokenImport", "load", "ImportError: No module named", id="import"),
        pytest.param("BrokenFactory", "factory", "RuntimeError: connection pool", id="factory"),
    ],
)
def test_a_broken_plugin_costs_only_its_profile(name: str, phase: str, error: str) -> None:
    """The profile enabling a broken plugin is left out and reported; the other one evicts."""
    registry = discovery.registry(
        plugins.IN_TREE,
        entry_points=[
            entry_point("BrokenImport", "brokenimport"),
            entry_point("BrokenFactory", "brokenfactory"),
        ],
    )
    registry.register(
        "EvictAll",
        lambda args, handle: fakes.ScriptedPlugin("EvictAll", handle, fakes.evict_all),
        args=fakes.NoArgs,
        extension_points=fakes.SCRIPT_POINTS,
    )
    raw = fakes.policy(
        profiles=[
            {
                **profile("broken", balance=[name]),
                # unloadable: its args are kept unchecked, so the file still loads
                "pluginConfig": [
                    {"name": name, "args": {"anything": 1} if phase == "load" else {}}
                ],
            },
            profile("working", balance=["EvictAll"]),
        ]
    )
    source = framework.StaticSource(
        nodes=fakes.nodes("n1", "n2"), pods=[builders.make_pod("p", node="n1")]
    )
    h = fakes.harness(raw, registry, source)
    assert [p.name for p in h.runner.profiles] == ["working"]
    report = h.runner.run_once()
    assert [(e.pod, e.profile) for e in report.evictions] == [("default/p", "working")]
    (failure,) = report.failures
    assert (failure.plugin, failure.profile, failure.extension_point) == (name, "broken", phase)
    assert error in failure.error
    errors = h.sample("nodeqos_descheduler_plugin_errors_total", plugin=name, profile="broken")
    assert errors == 1


def test_a_broken_plugin_in_every_profile_fails_start_up() -> None:
    """When no profile is left to run, start-up fails naming the broken plugin."""
    registry = discovery.registry(
        plugins.IN_TREE, entry_points=[entry_point("BrokenImport", "brokenimport")]
    )
    raw = fakes.policy(profiles=[profile("only", balance=["BrokenImport"])])
    with pytest.raises(framework.StartupError) as caught:
        fakes.harness(raw, registry, framework.StaticSource())
    (problem,) = caught.value.problems
    assert problem.startswith("profile only: plugin BrokenImport is broken: entry point")
    assert "ImportError" in problem


def test_validate_warns_which_profile_a_broken_plugin_keeps_out(tmp_path: Path) -> None:
    """--validate loads the file (the broken plugin's args kept) and says which profile will not run."""
    registry = discovery.registry(
        plugins.IN_TREE, entry_points=[entry_point("BrokenImport", "brokenimport")]
    )
    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            fakes.policy(
                profiles=[
                    {
                        **profile("broken", balance=["BrokenImport"]),
                        "pluginConfig": [{"name": "BrokenImport", "args": {"anything": 1}}],
                    },
                    profile("fine", deschedule=["RemoveFailedPods"]),
                ]
            )
        )
    )
    result = CliRunner().invoke(
        cli.main, ["--config", str(path), "--validate"], obj=cli.Session(registry)
    )
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(
        "warning: profile broken will not run: plugin BrokenImport is broken: entry point"
    )
    assert "fine" not in result.stderr


def test_run_composes_a_descheduler_with_plugins_passed_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """descheduler.run(argv, plugins=[module]) knows the plugin; without it the same file exits 2."""
    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            fakes.policy(
                profiles=[
                    {
                        **profile("p1", filter=["KeepLabelled"]),
                        "pluginConfig": [{"name": "KeepLabelled", "args": {"label": "keep"}}],
                    }
                ]
            )
        )
    )
    argv = ["--config", str(path), "--validate"]
    with pytest.raises(SystemExit) as composed:
        descheduler.run(argv, plugins=[keeplabelled])
    assert composed.value.code == 0
    assert capsys.readouterr().out == "configuration OK\n"
    with pytest.raises(SystemExit) as stock:
        descheduler.run(argv)
    assert stock.value.code == 2
    assert 'unknown plugin "KeepLabelled"' in capsys.readouterr().err
