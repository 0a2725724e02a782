"""Registry and start-up checks: every misconfiguration fails before the first cycle, by name."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from descheduler import config, framework, plugins
from descheduler.config import ExtensionPoint, PluginArgs
from descheduler.framework import Handle, Snapshot
from tests.descheduler import fakes

BALANCE = frozenset({ExtensionPoint.BALANCE})


class DescheduleOnly:
    name = "DescheduleOnly"

    def __init__(self, args: PluginArgs, handle: Handle) -> None:
        pass

    def deschedule(self, snapshot: Snapshot) -> None:
        pass


def build(raw: dict[str, Any], registry: framework.Registry) -> framework.Runner:
    return fakes.harness(raw, registry, framework.StaticSource()).runner


def test_registering_a_taken_name_raises() -> None:
    """A second plugin under one name is refused, naming it."""
    registry = plugins.registry()
    with pytest.raises(framework.RegistryError, match="'DefaultEvictor' is already registered"):
        registry.register("DefaultEvictor", None, args=fakes.NoArgs, extension_points=BALANCE)


def test_in_tree_registry_matches_the_config_catalog() -> None:
    """The registry lists every in-tree plugin with the spec the config loader uses."""
    registry = plugins.registry()
    assert dict(registry.catalog()) == dict(plugins.in_tree())
    assert "DefaultEvictor" in registry.implemented()


def test_unknown_plugin_names_the_known_ones() -> None:
    """A profile naming a plugin the registry lacks fails start-up with the known names."""
    loader = fakes.registry_with(Ghost=fakes.nothing)  # the config knows Ghost ...
    cfg = config.decode_configuration(fakes.policy(balance=["Ghost"]), plugins=loader.catalog())
    with pytest.raises(framework.StartupError) as caught:  # ... the runner's registry does not
        framework.Runner.from_config(
            cfg,
            plugins.registry(),
            source=framework.StaticSource(),
            backend=fakes.FakeBackend(),
            metrics=framework.Metrics(CollectorRegistry()),
        )
    [problem] = caught.value.problems
    assert problem.startswith('profiles[0] (p1): unknown plugin "Ghost"; known plugins: ')
    assert "DefaultEvictor" in problem


def test_plugin_without_factory_is_not_implemented_yet() -> None:
    """A plugin known to the config but without logic fails start-up naming it."""
    registry = plugins.registry()
    registry.register("Later", None, args=fakes.NoArgs, extension_points=BALANCE)
    with pytest.raises(framework.StartupError) as caught:
        build(fakes.policy(balance=["Later"]), registry)
    assert caught.value.problems == ["profiles[0] (p1): plugin Later is not implemented yet"]


def test_wrong_extension_point_names_plugin_and_point() -> None:
    """Enabled at balance, a class with only deschedule() is refused, naming both."""
    registry = plugins.registry()
    registry.register(
        "DescheduleOnly",
        DescheduleOnly,
        args=fakes.NoArgs,
        extension_points=frozenset({ExtensionPoint.BALANCE, ExtensionPoint.DESCHEDULE}),
    )
    with pytest.raises(framework.StartupError) as caught:
        build(fakes.policy(deschedule=["DescheduleOnly"], balance=["DescheduleOnly"]), registry)
    assert caught.value.problems == [
        "profiles[0] (p1): plugin DescheduleOnly is enabled at the balance extension point "
        "but does not implement it (no balance() method)"
    ]


def test_every_problem_of_every_profile_is_listed_at_once() -> None:
    """Two profiles, three problems: one StartupError with all three."""
    registry = fakes.registry_with(Ok=fakes.nothing)
    registry.register("Later", None, args=fakes.NoArgs, extension_points=BALANCE)
    registry.register("Never", None, args=fakes.NoArgs, extension_points=BALANCE)

    def refuse(args: Any, handle: Any) -> Any:
        raise ValueError("cannot work with these args")

    registry.register("Refuses", refuse, args=fakes.NoArgs, extension_points=BALANCE)
    raw = fakes.policy(
        profiles=[
            {"name": "a", "plugins": {"balance": {"enabled": ["Ok", "Later"]}}},
            {"name": "b", "plugins": {"balance": {"enabled": ["Never", "Refuses"]}}},
        ]
    )
    with pytest.raises(framework.StartupError) as caught:
        build(raw, registry)
    assert caught.value.problems == [
        "profiles[0] (a): plugin Later is not implemented yet",
        "profiles[1] (b): plugin Never is not implemented yet",
        "profiles[1] (b): plugin Refuses: cannot work with these args",
    ]
    assert str(caught.value).startswith("cannot start (3 problems):\n  profiles[0] (a)")


def test_only_one_evict_plugin_per_profile() -> None:
    """Koordinator's rule: a profile has at most one plugin at the evict point."""
    registry = plugins.registry()

    class OtherEvict:
        name = "OtherEvict"

        def __init__(self, args: PluginArgs, handle: Handle) -> None:
            pass

        def evict(self, *args: Any) -> Any:
            raise AssertionError("never called")

    registry.register(
        "OtherEvict",
        OtherEvict,
        args=fakes.NoArgs,
        extension_points=frozenset({ExtensionPoint.EVICT}),
    )
    raw = fakes.policy(
        profiles=[
            {"name": "p", "plugins": {"evict": {"enabled": ["DefaultEvictor", "OtherEvict"]}}}
        ]
    )
    with pytest.raises(framework.StartupError, match="only one plugin may be enabled at the evict"):
        build(raw, registry)


def test_sort_points_are_not_run() -> None:
    """preSort/sort load (upstream spells them) but a plugin there fails start-up."""
    registry = plugins.registry()
    registry.register(
        "Sorter", None, args=fakes.NoArgs, extension_points=frozenset({ExtensionPoint.SORT})
    )
    raw = fakes.policy(profiles=[{"name": "p", "plugins": {"sort": {"enabled": ["Sorter"]}}}])
    with pytest.raises(framework.StartupError) as caught:
        build(raw, registry)
    assert caught.value.problems == [
        "profiles[0] (p): plugin Sorter: the sort extension point is not supported"
    ]


def test_one_instance_per_plugin_per_profile() -> None:
    """DefaultEvictor enabled at three points is built once and serves all three."""
    calls: list[Handle] = []
    registry = plugins.registry()
    original = registry.entry("DefaultEvictor").factory
    assert original is not None
    counting = framework.Registry()
    for name in registry:
        entry = registry.entry(name)
        factory = entry.factory
        if name == "DefaultEvictor":

            def factory(args: PluginArgs, handle: Handle) -> object:
                calls.append(handle)
                return original(args, handle)

        counting.register(
            name, factory, args=entry.spec.args, extension_points=entry.spec.extension_points
        )
    raw = fakes.policy(
        profiles=[
            {
                "name": "p",
                "plugins": {
                    "evict": {"enabled": ["DefaultEvictor"]},
                    "filter": {"enabled": ["DefaultEvictor"]},
                },
            }
        ]
    )
    runner = build(raw, counting)
    assert len(calls) == 1
    proxy = runner.profiles[0].evictor
    assert proxy.evict_plugin is not None
    assert proxy.evict_plugin[1] is proxy.filters[0][1] is proxy.pre_eviction_filters[0][1]
