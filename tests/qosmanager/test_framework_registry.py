"""The plugin registry, the feature gates and the plugins' flags (InitFlags)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import click
import pytest

from cgroups import CgroupVersion, Driver
from qosmanager import (
    BUILTIN_FEATURES,
    Evictor,
    FeatureGates,
    FeatureSpec,
    Handle,
    Manager,
    PeriodicStrategy,
    PluginRegistry,
    PluginSetupError,
    QoSMetrics,
    ResourceExecutor,
    bind_handle,
    builtin_registry,
    register_qos_ext_plugin,
)
from tests.cgroupfs_builder import write_pod_tree
from tests.qosmanager.builders import FakeEvictionAPI, FakeHealth, FakeStates


class Noop:
    """A plugin with one flag."""

    def __init__(self, flag: str = "--noop-level") -> None:
        self.flag = flag
        self.level = 0

    def init_flags(self) -> Sequence[click.Parameter]:
        def store(_ctx: click.Context, _param: click.Parameter, value: int) -> int:
            self.level = value
            return value

        return [click.Option([self.flag], type=int, default=0, expose_value=False, callback=store)]

    def setup(self, client: object, metric_cache: object, states: object) -> None:
        pass

    def run(self, stop: threading.Event) -> None:
        stop.wait()


def handle(tmp_path: Path, metrics: QoSMetrics) -> Handle:
    tree = write_pod_tree(tmp_path, CgroupVersion.V2, Driver.SYSTEMD)
    executor = ResourceExecutor(tree.fs, metrics=metrics)
    return Handle(
        fs=tree.fs,
        executor=executor,
        evictor=Evictor(FakeEvictionAPI(), metrics=metrics),
        metrics=metrics,
    )


def test_builtin_registry_lists_koordinators_gates_and_defaults(
    tmp_path: Path, metrics: QoSMetrics
) -> None:
    """Eight built-ins under Koordinator's names; BECPUSuppress, BatchResource, CPUBurst on."""
    registry = builtin_registry(handle(tmp_path, metrics))
    assert sorted(e.name for e in registry) == [
        "BECPUEvict",
        "BECPUIdle",
        "BECPUSuppress",
        "BEMemoryEvict",
        "BatchResource",
        "CPUBurst",
        "CgroupReconcile",
        "SystemConfig",
    ]
    assert all(e.builtin for e in registry)
    assert FeatureGates(BUILTIN_FEATURES).as_dict() == {
        "BECPUEvict": False,
        "BECPUIdle": False,
        "BECPUSuppress": True,
        "BEMemoryEvict": False,
        "BatchResource": True,
        "CPUBurst": True,
        "CgroupReconcile": False,
        "SystemConfig": False,
    }
    assert [f.name for f in BUILTIN_FEATURES] == sorted(f.name for f in BUILTIN_FEATURES)


def test_each_call_builds_a_fresh_registry(tmp_path: Path, metrics: QoSMetrics) -> None:
    """No global registry: extending one registry leaves the next one untouched."""
    first = builtin_registry(handle(tmp_path / "a", metrics))
    register_qos_ext_plugin(first, "Noop", FeatureSpec(default=True), Noop())
    assert "Noop" in first
    assert "Noop" not in builtin_registry(handle(tmp_path / "b", metrics))


def test_taken_name_is_an_error() -> None:
    """Registering a name twice raises, naming it."""
    registry = PluginRegistry()
    register_qos_ext_plugin(registry, "Noop", FeatureSpec(default=False), Noop())
    with pytest.raises(ValueError, match="'Noop' is already registered"):
        register_qos_ext_plugin(registry, "Noop", FeatureSpec(default=True), Noop("--other"))


def test_unknown_extension_gate_is_rejected_listing_known_ones() -> None:
    """--qos-extension-plugins accepts only registered extension plugins."""
    registry = PluginRegistry()
    register_qos_ext_plugin(registry, "Noop", FeatureSpec(default=False), Noop())
    assert registry.extension_gates("Noop=true").enabled("Noop") is True
    assert registry.extension_gates("").enabled("Noop") is False
    with pytest.raises(ValueError, match="unknown feature gate 'Nope'; known gates: Noop"):
        registry.extension_gates("Nope=true")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("Noop", "is not Name=true|false", id="no-value"),
        pytest.param("Noop=maybe", "is not true or false", id="not-a-bool"),
        pytest.param("=true", "is not Name=true|false", id="no-name"),
    ],
)
def test_malformed_gate_flags_are_rejected(text: str, message: str) -> None:
    """Gate flags must read Name=true|false."""
    with pytest.raises(ValueError, match=message):
        FeatureGates.from_flag(BUILTIN_FEATURES, text)


def test_plugin_flags_configure_plugins_through_click(tmp_path: Path, metrics: QoSMetrics) -> None:
    """registry.click_params() carries every plugin's flags and --qos-extension-plugins."""
    registry = builtin_registry(handle(tmp_path, metrics))
    noop = Noop()
    register_qos_ext_plugin(registry, "Noop", FeatureSpec(default=False), noop)
    seen: dict[str, object] = {}
    command = click.Command("agent", params=registry.click_params(), callback=seen.update)
    command.main(
        [
            "--cpu-suppress-interval-seconds",
            "5",
            "--memory-evict-cool-time-seconds",
            "10",
            "--noop-level",
            "3",
            "--qos-extension-plugins",
            "Noop=true",
        ],
        standalone_mode=False,
    )
    assert registry.get("BECPUSuppress").plugin.interval == 5.0  # type: ignore[attr-defined]
    assert registry.get("BEMemoryEvict").plugin.cool_time == 10.0  # type: ignore[attr-defined]
    assert registry.get("CPUBurst").plugin.interval == 1.0  # type: ignore[attr-defined]
    assert noop.level == 3
    assert seen == {"qos_extension_plugins": {"Noop": True}}
    assert registry.extension_gates(seen["qos_extension_plugins"]).enabled("Noop")  # type: ignore[arg-type]


def test_a_flag_declared_by_two_plugins_is_an_error() -> None:
    """Two plugins may not claim the same flag."""
    registry = PluginRegistry()
    register_qos_ext_plugin(registry, "A", FeatureSpec(default=False), Noop("--shared"))
    register_qos_ext_plugin(registry, "B", FeatureSpec(default=False), Noop("--shared"))
    with pytest.raises(
        ValueError, match="flag --shared of QoS plugin 'B' is already declared by 'A'"
    ):
        registry.click_params()


def test_builtins_built_before_their_handle_are_bound_later(
    tmp_path: Path, metrics: QoSMetrics
) -> None:
    """builtin_registry() leaves the built-ins unbound; bind_handle gives each the handle."""
    registry = builtin_registry()
    bound = handle(tmp_path, metrics)
    bind_handle(registry, bound)
    for entry in registry:
        assert isinstance(entry.plugin, PeriodicStrategy)
        assert entry.plugin.handle is bound


def test_an_unbound_builtin_fails_setup_naming_it(metrics: QoSMetrics) -> None:
    """A strategy never given a handle stops start-up at setup, not at every tick."""
    registry = builtin_registry()
    manager = Manager(
        registry,
        builtin_gates=FeatureGates(BUILTIN_FEATURES),
        extension_gates=registry.extension_gates(),
        health=FakeHealth(),
        metrics=metrics,
    )
    with pytest.raises(PluginSetupError, match=r"'BECPUSuppress' failed to set up: .* no Handle"):
        manager.setup_all(None, None, FakeStates())  # type: ignore[arg-type]
