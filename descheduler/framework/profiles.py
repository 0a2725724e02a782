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

from dataclasses import dataclass, field
from typing import Any, cast

from descheduler import config, usagesources
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
from descheduler.usagesources import Sources
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


@dataclass(frozen=True, slots=True)
class _Shared:
    """What every profile's plugins are built with."""

    registry: Registry
    core: EvictionCore
    cell: CycleCell
    metrics: Metrics
    clock: Clock
    client: rest.Rest | None
    recorder: events.Recorder | None
    sources: Sources


@dataclass(slots=True)
class _Outcome:
    """One profile built: its runtime, or the problems and broken plugins that stop it."""

    runtime: ProfileRuntime | None = None
    problems: list[str] = field(default_factory=list)
    broken: list[PluginFailure] = field(default_factory=list)


class _Refused(Exception):
    """A plugin that cannot be built as configured: a problem of the configuration."""


class _Broken(Exception):
    """A plugin that is broken rather than misconfigured: isolated, its profile left out."""

    def __init__(self, failure: PluginFailure) -> None:
        super().__init__(failure.error)
        self.failure = failure


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
    sources: Sources = usagesources.NONE,
) -> Built:
    """Every profile built, or one StartupError listing every problem.

    `client` and `recorder` reach plugins through their Handle (None offline).
    A profile with a broken plugin is left out (`Built.disabled`); when no
    profile is left, the broken plugins are the StartupError's problems.
    """
    shared = _Shared(registry, core, cell, metrics, clock, client, recorder, sources)
    outcomes = [
        _build(profile, f"profiles[{position}] ({profile.name})", shared)
        for position, profile in enumerate(profiles)
    ]
    problems = [problem for outcome in outcomes for problem in outcome.problems]
    broken = [failure for outcome in outcomes for failure in outcome.broken]
    built = [outcome.runtime for outcome in outcomes if outcome.runtime is not None]
    if not problems and profiles and not built:
        problems = [f"profile {f.profile}: plugin {f.plugin} is broken: {f.error}" for f in broken]
    if problems:
        raise StartupError(problems)
    for failure in broken:
        metrics.plugin_errors.labels(failure.plugin, failure.profile).inc()
    return Built(tuple(built), tuple(broken))


def _build(profile: config.Profile, where: str, shared: _Shared) -> _Outcome:
    """One profile: its Handle, each enabled plugin built once and checked at its points."""
    decisions = Decisions(shared.cell, shared.metrics, profile.name)
    proxy = EvictorProxy(shared.core, decisions)
    handle = Handle(
        evictor=proxy,
        decisions=decisions,
        clock=shared.clock,
        snapshot=shared.cell.snapshot,
        profile=profile.name,
        dry_run=shared.core.dry_run,
        client=shared.client,
        recorder=shared.recorder,
        sources=shared.sources,
    )
    outcome = _Outcome()
    instances: dict[str, object] = {}
    failed: set[str] = set()
    for point in ExtensionPoint:
        for name in profile.enabled(point):
            if point in _UNSUPPORTED:
                outcome.problems.append(
                    f"{where}: plugin {name}: the {point} extension point is not supported"
                )
                continue
            if name in failed:
                continue
            if name not in instances:
                try:
                    instances[name] = _instantiate(profile, name, shared.registry, handle)
                except _Refused as err:
                    outcome.problems.append(f"{where}: {err}")
                    failed.add(name)
                    continue
                except _Broken as err:
                    outcome.broken.append(err.failure)
                    failed.add(name)
                    continue
            method = METHODS[point]
            if not callable(getattr(instances[name], method, None)):
                outcome.problems.append(
                    f"{where}: plugin {name} is enabled at the {point} extension point "
                    f"but does not implement it (no {method}() method)"
                )
    evict_plugins = profile.enabled(ExtensionPoint.EVICT)
    if len(evict_plugins) > 1:
        outcome.problems.append(
            f"{where}: only one plugin may be enabled at the evict extension point "
            f"(found {', '.join(evict_plugins)})"
        )
    if not outcome.problems and not outcome.broken:
        outcome.runtime = _runtime(profile, handle, proxy, instances)
    return outcome


def _runtime(
    profile: config.Profile, handle: Handle, proxy: EvictorProxy, instances: dict[str, object]
) -> ProfileRuntime:
    """The profile's plugins per point, in configuration order; the proxy wired to its evictor."""

    def plugins(point: ExtensionPoint) -> list[tuple[str, Any]]:
        # every (plugin, point) pair passed the method check in _build
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


def _instantiate(profile: config.Profile, name: str, registry: Registry, handle: Handle) -> object:
    """The plugin built from its factory and Args; _Refused or _Broken says why not."""
    try:
        entry = registry.entry(name)
    except RegistryError as err:
        raise _Refused(str(err)) from err
    if entry.error is not None:
        raise _Broken(PluginFailure(name, profile.name, "load", entry.error))
    if entry.factory is None:
        raise _Refused(f"plugin {name} is not implemented yet")
    args = profile.plugin_config.get(name)
    if args is None:  # the config was loaded against another catalog
        args = entry.spec.args.from_mapping(None)
    try:
        return entry.factory(args, handle)
    except ValueError as err:  # the factory's way of refusing its Args
        raise _Refused(f"plugin {name}: {err}") from err
    except Exception as err:  # a broken plugin: isolated, its profile left out
        detail = f"factory raised {type(err).__name__}: {err}"
        raise _Broken(PluginFailure(name, profile.name, "factory", detail)) from err
