"""The scheduler framework: plugins from the entry-point group, profile config, isolation, scores."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
import yaml
from prometheus_client import CollectorRegistry

from extender import args as argsmod
from extender import framework, plugins
from extender.framework import ExtensionPoint, config
from tests.builders import make_pod_dict

ROOT = Path(__file__).resolve().parents[2]
NAMES = ["n1", "n2", "n3"]


class Args:
    """Test plugins' args: an optional `label`; anything else is refused with its path."""

    def __init__(self, label: str = "") -> None:
        self.label = label

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], path: str) -> Args:
        unknown = [
            f"{path}.{key}: unknown field; known fields are label" for key in raw if key != "label"
        ]
        if unknown:
            raise framework.ArgsError(unknown)
        return cls(**raw)


class Refuse:
    """Refuses the nodes given at construction; counts its pre_filter calls."""

    calls: ClassVar[list[str]] = []

    def __init__(self, refused: Mapping[str, str], seen: list[Sequence[str]] | None = None) -> None:
        self.refused, self.seen = refused, seen if seen is not None else []

    def pre_filter(self, pod: Mapping[str, Any]) -> str:
        self.calls.append(pod["metadata"]["name"])
        return str(pod["metadata"]["name"])

    def filter(self, state: str, names: Sequence[str]) -> Mapping[str, str]:
        self.seen.append(list(names))
        return {n: r for n, r in self.refused.items() if n in names}


class Boom:
    """Raises at every point."""

    def filter(self, state: object, names: Sequence[str]) -> Mapping[str, str]:
        raise RuntimeError("boom")

    def score(self, state: object, names: Sequence[str]) -> list[int]:
        raise RuntimeError("boom")


class Fixed:
    """Scores from a table; a normalize_score may rescale."""

    def __init__(self, scores: Mapping[str, int]) -> None:
        self.scores = scores

    def score(self, state: object, names: Sequence[str]) -> list[int]:
        return [self.scores[n] for n in names]


class Halved(Fixed):
    def normalize_score(
        self, state: object, names: Sequence[str], scores: Sequence[int]
    ) -> list[int]:
        return [s // 2 for s in scores]


def surface(name: str, *points: ExtensionPoint) -> SimpleNamespace:
    return SimpleNamespace(
        NAME=name, Args=Args, EXTENSION_POINTS=frozenset(points), factory=lambda args, handle: None
    )


def registry() -> framework.Registry:
    return plugins.registry(
        [
            surface("Guard", ExtensionPoint.FILTER),
            surface("Capacity", ExtensionPoint.SCORE),
        ],
        installed=False,
    )


def run(
    filters: list[framework.Slot], scores: list[framework.Slot]
) -> tuple[framework.Framework, CollectorRegistry]:
    metrics = CollectorRegistry()
    return framework.Framework(filters, scores, metrics), metrics


def errors(metrics: CollectorRegistry, plugin: str, point: str) -> float | None:
    return metrics.get_sample_value(
        "nodeqos_extender_plugin_errors_total", {"plugin": plugin, "point": point}
    )


POD = make_pod_dict("web-1", node=None, cpu="500m")


def test_pyproject_declares_exactly_the_in_tree_table() -> None:
    """pyproject.toml's nodeqos.scheduler.plugins entry points are extender.plugins.IN_TREE."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert declared[framework.GROUP] == dict(plugins.IN_TREE)


def test_a_bare_loadaware_args_file_is_loadaware_alone_with_the_same_args() -> None:
    """Today's LoadAwareSchedulingArgs document: LoadAwareScheduling at filter and score, weight 1."""
    raw = {"kind": "LoadAwareSchedulingArgs", "usageThresholds": {"cpu": 50}}
    profile = config.decode_config(raw, registry())
    assert profile.legacy
    assert (
        [e.name for e in profile.filter]
        == [e.name for e in profile.score]
        == ["LoadAwareScheduling"]
    )
    assert profile.args["LoadAwareScheduling"] == argsmod.decode_args(raw)


def test_a_profile_enables_plugins_with_weights_and_args() -> None:
    """filter/score sets with required and weight; pluginConfig args decoded by each plugin."""
    raw = {
        "apiVersion": config.API_VERSION,
        "kind": config.KIND,
        "profiles": [
            {
                "plugins": {
                    "filter": {
                        "enabled": [
                            {"name": "LoadAwareScheduling"},
                            {"name": "Guard", "required": True},
                        ]
                    },
                    "score": {
                        "enabled": [
                            {"name": "LoadAwareScheduling"},
                            {"name": "Capacity", "weight": 3},
                        ]
                    },
                },
                "pluginConfig": [
                    {"name": "LoadAwareScheduling", "args": {"usageThresholds": {"cpu": 70}}},
                    {"name": "Guard", "args": {"label": "x"}},
                ],
            }
        ],
    }
    profile = config.decode_config(raw, registry())
    assert profile.filter == (
        config.Enabled("LoadAwareScheduling"),
        config.Enabled("Guard", required=True),
    )
    assert profile.score == (
        config.Enabled("LoadAwareScheduling"),
        config.Enabled("Capacity", weight=3),
    )
    assert profile.args["LoadAwareScheduling"].usage_thresholds["cpu"] == 70  # type: ignore[attr-defined]
    assert profile.args["Guard"].label == "x"  # type: ignore[attr-defined]
    assert isinstance(profile.args["Capacity"], Args)


def test_every_problem_is_listed_with_its_field_path() -> None:
    """Unknown plugin (naming the group), wrong point, bad weight, bad args, Permit: all reported."""
    raw = {
        "apiVersion": config.API_VERSION,
        "kind": config.KIND,
        "profiles": [
            {
                "plugins": {
                    "filter": {"enabled": [{"name": "Nope"}, {"name": "Capacity"}]},
                    "score": {"enabled": [{"name": "LoadAwareScheduling", "weight": 0}]},
                    "permit": {"enabled": [{"name": "Coscheduling"}]},
                },
                "pluginConfig": [
                    {"name": "LoadAwareScheduling", "args": {"usageThresholds": {"cpu": 150}}},
                    {"name": "Guard", "args": {"colour": "red"}},
                ],
            }
        ],
    }
    with pytest.raises(framework.ArgsError) as caught:
        config.decode_config(raw, registry())
    problems = caught.value.problems
    assert len(problems) == 6, problems
    p = "profiles[0]"
    assert problems[0].startswith(
        f'{p}.plugins.filter.enabled[0].name: unknown scheduler plugin "Nope": install the package'
        ' that declares it in the entry-point group "nodeqos.scheduler.plugins"'
    )
    assert (
        problems[1]
        == f"{p}.plugins.filter.enabled[1].name: plugin Capacity does not implement filter (only score)"
    )
    assert problems[2].startswith(
        f"{p}.plugins.score.enabled[0].weight: must be within [1, 100] (got 0)"
    )
    assert problems[3].startswith(f"{p}.plugins.permit: the extender serves filter and score only")
    assert (
        problems[4]
        == f"{p}.pluginConfig[0].args.usageThresholds.cpu: must be within [0, 100] (got 150)"
    )
    assert problems[5] == f"{p}.pluginConfig[1].args.colour: unknown field; known fields are label"


def test_the_command_exits_2_naming_the_group_of_an_unknown_plugin(tmp_path: Path) -> None:
    """`--validate` of a profile enabling an uninstalled plugin: exit 2, every problem on stderr."""
    path = tmp_path / "profile.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": config.API_VERSION,
                "kind": config.KIND,
                "profiles": [
                    {
                        "plugins": {"filter": {"enabled": [{"name": "BEMemoryGuard"}]}},
                        "pluginConfig": [
                            {"name": "LoadAwareScheduling", "args": {"usageThreshold": {}}}
                        ],
                    }
                ],
            }
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "extender.cli", "--config", str(path), "--validate"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "invalid configuration (2 problems):" in done.stderr
    assert 'entry-point group "nodeqos.scheduler.plugins"' in done.stderr
    assert "profiles[0].pluginConfig[0].args.usageThreshold: unknown field" in done.stderr


def test_filters_run_in_order_over_what_the_earlier_ones_let_through() -> None:
    """The second filter sees only the nodes the first passed; FailedNodes holds both's reasons."""
    seen: list[Sequence[str]] = []
    first = Refuse({"n1": "too hot"})
    second = Refuse({"n2": "no batch"}, seen)
    fw, _ = run([framework.Slot("A", first), framework.Slot("B", second)], [])
    passed, failed = fw.filter(POD, NAMES)
    assert passed == ["n3"]
    assert failed == {"n1": "too hot", "n2": "no batch"}
    assert seen == [["n2", "n3"]]


def test_per_pod_state_is_computed_once_for_filter_and_prioritize() -> None:
    """pre_filter runs once for the pod version, though filter and prioritize both read it."""
    Refuse.calls.clear()
    plugin = Refuse({})
    plugin.score = lambda state, names: [50] * len(names)  # type: ignore[attr-defined]
    fw, _ = run([framework.Slot("A", plugin)], [framework.Slot("A", plugin)])
    pod = {**POD, "metadata": {**POD["metadata"], "resourceVersion": "7"}}
    fw.filter(pod, NAMES)
    fw.prioritize(pod, NAMES)
    assert Refuse.calls == ["web-1"]


def test_a_failing_filter_is_skipped_and_counted() -> None:
    """A filter that raises: the other filter still decides, the failure is counted."""
    fw, metrics = run(
        [framework.Slot("Boom", Boom()), framework.Slot("A", Refuse({"n1": "too hot"}))], []
    )
    assert fw.filter(POD, NAMES) == (["n2", "n3"], {"n1": "too hot"})
    assert errors(metrics, "Boom", "filter") == 1


def test_a_failing_required_filter_refuses_every_node_with_the_failure() -> None:
    """required: true: the pod is not placed around the failed filter; the reason says why."""
    fw, metrics = run([framework.Slot("Boom", Boom(), required=True)], [])
    passed, failed = fw.filter(POD, NAMES)
    assert passed == []
    assert failed["n2"] == "scheduler plugin Boom (a required filter) failed: boom"
    assert set(failed) == set(NAMES)
    assert errors(metrics, "Boom", "filter") == 1


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(Boom(), id="raises"),
        pytest.param(Fixed({"n1": 500, "n2": 0, "n3": 0}), id="out-of-range"),
    ],
)
def test_a_failing_score_plugin_leaves_the_others_to_decide(bad: object) -> None:
    """Its scores are dropped (and counted); the other plugin's scores are the answer."""
    good = Fixed({"n1": 10, "n2": 90, "n3": 50})
    fw, metrics = run([], [framework.Slot("Bad", bad, weight=5), framework.Slot("Good", good)])
    assert fw.prioritize(POD, NAMES) == [("n1", 1), ("n2", 9), ("n3", 5)]
    assert errors(metrics, "Bad", "score") == 1


@pytest.mark.parametrize(
    "scores",
    [
        pytest.param({"n1": 101, "n2": 0, "n3": 0}, id="over-100"),
        pytest.param({"n1": -1, "n2": 0, "n3": 0}, id="negative"),
        pytest.param({"n1": 50.5, "n2": 0, "n3": 0}, id="not-an-integer"),
    ],
)
def test_a_lone_score_plugin_out_of_range_scores_every_node_zero(scores: dict[str, Any]) -> None:
    """One score plugin: its range is checked while mapping to 0..10 (no extra pass)."""
    fw, metrics = run([], [framework.Slot("Bad", Fixed(scores))])
    assert fw.prioritize(POD, NAMES) == [("n1", 0), ("n2", 0), ("n3", 0)]
    assert errors(metrics, "Bad", "score") == 1


def test_scores_are_normalized_then_weighted_then_scaled_to_ten() -> None:
    """round((3 x normalized A + 1 x B) / 4 / 10): A halved by its normalize_score."""
    a = Halved({"n1": 200, "n2": 0, "n3": 100})
    b = Fixed({"n1": 0, "n2": 100, "n3": 50})
    fw, _ = run([], [framework.Slot("A", a, weight=3), framework.Slot("B", b)])
    # n1: (3*100 + 0)/40 = 7.5 -> 8; n2: 100/40 = 2.5 -> 3; n3: (150 + 50)/40 = 5
    assert fw.prioritize(POD, NAMES) == [("n1", 8), ("n2", 3), ("n3", 5)]


def test_a_plugin_enabled_at_a_point_it_lacks_is_refused_at_start() -> None:
    """A filter-only object enabled at score: the framework names it."""
    with pytest.raises(TypeError, match="Guard is enabled at score but has no score"):
        run([], [framework.Slot("Guard", Refuse({}))])


def test_plugins_watching_one_resource_share_an_informer_and_fail_alone() -> None:
    """Two subscribers, one informer; the one whose projection raises misses the object alone."""
    from extender.framework import watch
    from kube import cache, rest

    got: list[tuple[str, Any, Any]] = []
    watches = watch.Watches()

    def broken(raw: Mapping[str, Any]) -> Any:
        raise KeyError("spec")

    watches.subscribe(cache.NODES, lambda raw: raw["metadata"]["name"], lambda *e: got.append(e))
    watches.subscribe(cache.NODES, broken, lambda *e: got.append(("broken", *e)))
    watches.subscribe(cache.PODS, lambda raw: raw, lambda *e: None, "spec.nodeName!=")
    client = rest.Rest.__new__(rest.Rest)  # never started: no call is made
    informers = watches.informers(client)
    assert [i.name for i in informers] == ["nodes", "pods (spec.nodeName!=)"]
    nodes = informers[0]
    projected = nodes._project({"metadata": {"name": "n1"}})
    assert nodes._on_event is not None
    nodes._on_event("ADDED", None, projected)
    assert got == [("ADDED", None, "n1")]


def test_write_config_to_prints_a_profile_that_loads_back(tmp_path: Path) -> None:
    """`--write-config-to -` of a profile: the defaulted profile, which decodes to the same one."""
    path = tmp_path / "profile.yaml"
    raw = {
        "apiVersion": config.API_VERSION,
        "kind": config.KIND,
        "profiles": [
            {
                "plugins": {
                    "filter": {"enabled": [{"name": "LoadAwareScheduling"}]},
                    "score": {"enabled": [{"name": "LoadAwareScheduling", "weight": 2}]},
                },
                "pluginConfig": [
                    {"name": "LoadAwareScheduling", "args": {"usageThresholds": {"cpu": 50}}}
                ],
            }
        ],
    }
    path.write_text(yaml.safe_dump(raw))
    done = subprocess.run(
        [sys.executable, "-m", "extender.cli", "--config", str(path), "--write-config-to", "-"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    written = yaml.safe_load(done.stdout)
    args = written["profiles"][0]["pluginConfig"][0]["args"]
    assert args["usageThresholds"] == {"cpu": 50}
    assert args["estimatedScalingFactors"] == {"cpu": 85, "memory": 70}  # defaulted
    reg = plugins.registry(installed=False)
    assert config.decode_config(written, reg) == config.decode_config(raw, reg)
