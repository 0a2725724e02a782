"""Turning configured profiles into running ones: plugins built and checked at start-up.

For each profile: one Handle and evictor proxy; each enabled plugin built once
from its factory and Args; then every (plugin, extension point) pair checked
against the point's method. All problems of all profiles are collected and
raised together as one `StartupError`, each naming the profile, the plugin and,
where it applies, the extension point:

- a name the registry does not know;
- "plugin X is not implemented yet" (registered without a factory);
- a plugin enabled at a point whose method its class lacks;
- a factory refusing its Args (it raises ValueError);
- more than one plugin at the evict point (Koordinator's rule), or any plugin
  at preSort/sort (no in-tree plugin serves them; the framework runs neither).

A plugin that is broken rather than misconfigured - its entry point could not
be loaded (`discovery`), or its factory raised anything but ValueError - is
isolated like a plugin call that raises (STYLE.md): its profile is left out
and recorded as a `PluginFailure` naming plugin, profile and error, and the
other profiles run. Only when that leaves no profile at all is it a
`StartupError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from descheduler import config
from descheduler.config import ExtensionPoint
from descheduler.framework.cycle import CycleCell, Decisions
from descheduler.framework.evictor import EvictionCore, EvictorProxy
from descheduler.framework.handle import Handle
from descheduler.framework.interfaces import (
    METHODS,
    BalancePlugin,
    Clock,
    ControllerPlugin,
    DeschedulePlugin,
    EvictPlugin,
    FilterPlugin,
    PreEvictionFilterPlugin,
)
from descheduler.framework.metrics import Metrics
from descheduler.framework.registry import Registry, RegistryError
from descheduler.framework.report import PluginFailure
from kube import events, rest, selectors

_UNSUPPORTED = (ExtensionPoint.PRE_SORT, ExtensionPoint.SORT)


class StartupError(Exception):
    """The profiles cannot run; `problems` lists every reason."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        count = len(problems)
        lines = "\n".join(f"  {problem}" for problem in problems)
        super().__init__(f"cannot start ({count} problem{'s' if count != 1 else ''}):\n{lines}")


@dataclass(frozen=True, slots=True)
class ProfileRuntime:
    """A profile ready to run: its plugins per point, in configuration order."""

    name: str
    handle: Handle
    evictor: EvictorProxy
    node_selector: selectors.LabelSelector | None
    deschedule: tuple[tuple[str, DeschedulePlugin], ...]
    balance: tuple[tuple[str, BalancePlugin], ...]
    controllers: tuple[tuple[str, ControllerPlugin], ...]


@dataclass(frozen=True, slots=True)
class Built:
    """The profiles that run, and the broken plugins that kept the others out."""

    profiles: tuple[ProfileRuntime, ...]
    disabled: tuple[PluginFailure, ...] = ()


def build_profiles(
    profiles: tuple[config.Profile, ...],
    registry: Registry,
    *,
    core: EvictionCore,
    cell: CycleCell,
    metrics: Metrics,
    clock: Clock,
    client: rest.Rest | None = None,
    recorder: events.Recorder | None = None,
) -> Built:
    """Every profile built, or one StartupError listing every problem.

    `client` and `recorder` reach plugins through their Handle (None offline).
    A profile with a broken plugin is left out (`Built.disabled`); when no
    profile is left, the broken plugins are the StartupError's problems.
    """
    problems: list[str] = []
    broken: list[PluginFailure] = []
    built = []
    for position, profile in enumerate(profiles):
        where = f"profiles[{position}] ({profile.name})"
        runtime = _build(
            profile, registry, where, problems, broken, core, cell, metrics, clock, client, recorder
        )
        if runtime is not None:
            built.append(runtime)
    if not problems and profiles and not built:
        problems = [f"profile {f.profile}: plugin {f.plugin} is broken: {f.error}" for f in broken]
    if problems:
        raise StartupError(problems)
    for failure in broken:
        metrics.plugin_errors.labels(failure.plugin, failure.profile).inc()
    return Built(tuple(built), tuple(broken))


def _build(
    profile: config.Profile,
    registry: Registry,
    where: str,
    problems: list[str],
    broken: list[PluginFailure],
    core: EvictionCore,
    cell: CycleCell,
    metrics: Metrics,
    clock: Clock,
    client: rest.Rest | None,
    recorder: events.Recorder | None,
) -> ProfileRuntime | None:
    decisions = Decisions(cell, metrics, profile.name)
    proxy = EvictorProxy(core, decisions)
    handle = Handle(
        evictor=proxy,
        decisions=decisions,
        clock=clock,
        snapshot=cell.snapshot,
        profile=profile.name,
        dry_run=core.dry_run,
        client=client,
        recorder=recorder,
    )
    before, broken_before = len(problems), len(broken)
    instances: dict[str, object] = {}
    failed: set[str] = set()
    for point in ExtensionPoint:
        for name in profile.enabled(point):
            if point in _UNSUPPORTED:
                problems.append(
                    f"{where}: plugin {name}: the {point} extension point is not supported"
                )
                continue
            if name in failed:
                continue
            if name not in instances:
                plugin = _instantiate(profile, registry, name, handle, where, problems, broken)
                if plugin is None:
                    failed.add(name)
                    continue
                instances[name] = plugin
            method = METHODS[point]
            if not callable(getattr(instances[name], method, None)):
                problems.append(
                    f"{where}: plugin {name} is enabled at the {point} extension point "
                    f"but does not implement it (no {method}() method)"
                )
    evict_plugins = profile.enabled(ExtensionPoint.EVICT)
    if len(evict_plugins) > 1:
        problems.append(
            f"{where}: only one plugin may be enabled at the evict extension point "
            f"(found {', '.join(evict_plugins)})"
        )
    if len(problems) > before or len(broken) > broken_before:
        return None

    def plugins(point: ExtensionPoint) -> list[tuple[str, Any]]:
        # every (plugin, point) pair passed the method check above
        return [(name, instances[name]) for name in profile.enabled(point)]

    proxy.filters = cast(list[tuple[str, FilterPlugin]], plugins(ExtensionPoint.FILTER))
    proxy.pre_eviction_filters = cast(
        list[tuple[str, PreEvictionFilterPlugin]], plugins(ExtensionPoint.PRE_EVICTION_FILTER)
    )
    evict = cast(list[tuple[str, EvictPlugin]], plugins(ExtensionPoint.EVICT))
    proxy.evict_plugin = evict[0] if evict else None
    return ProfileRuntime(
        name=profile.name,
        handle=handle,
        evictor=proxy,
        node_selector=profile.node_selector,
        deschedule=tuple(plugins(ExtensionPoint.DESCHEDULE)),
        balance=tuple(plugins(ExtensionPoint.BALANCE)),
        controllers=tuple(
            (name, cast(ControllerPlugin, plugin))
            for name, plugin in instances.items()
            if callable(getattr(plugin, "run", None))
        ),
    )


def _instantiate(
    profile: config.Profile,
    registry: Registry,
    name: str,
    handle: Handle,
    where: str,
    problems: list[str],
    broken: list[PluginFailure],
) -> object | None:
    try:
        entry = registry.entry(name)
    except RegistryError as err:
        problems.append(f"{where}: {err}")
        return None
    if entry.error is not None:
        broken.append(PluginFailure(name, profile.name, "load", entry.error))
        return None
    if entry.factory is None:
        problems.append(f"{where}: plugin {name} is not implemented yet")
        return None
    args = profile.plugin_config.get(name)
    if args is None:  # the config was loaded against another catalog
        args = entry.spec.args.from_mapping(None)
    try:
        return entry.factory(args, handle)
    except ValueError as err:  # the factory's way of refusing its Args
        problems.append(f"{where}: plugin {name}: {err}")
        return None
    except Exception as err:  # a broken plugin: isolated, its profile left out
        detail = f"factory raised {type(err).__name__}: {err}"
        broken.append(PluginFailure(name, profile.name, "factory", detail))
        return None
