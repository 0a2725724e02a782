"""Finding QoS plugins: entry points of group `nodeqos.agent.qos_plugins` into a PluginRegistry.

A QoS plugin is any importable object (normally its package) exporting:

    NAME: str                      # its gate name in --qos-extension-plugins
    FEATURE: qosmanager.FeatureSpec  # default, stage, description of that gate
    factory() -> ExtensionPlugin   # a fresh instance (init_flags / setup / run)

and a package makes it known with an entry point:

    [project.entry-points."nodeqos.agent.qos_plugins"]
    BECgroupIdle = "becgroupidle"

`registry(in_tree, extra)` is the one path every plugin takes: the in-tree
strategies (`qosmanager.plugins.IN_TREE`, gated by `--feature-gates` with
Koordinator's names), every installed entry point and the `extra` objects an
embedder passes (`agent.run(argv, qos_plugins=[...])`) are loaded and checked
by `register_object`; all but the in-tree ones are extension plugins, gated
by `--qos-extension-plugins`. Each call builds fresh instances, so two agent
commands never share a plugin's state. A plugin built on
`qosmanager.PeriodicStrategy` gets the agent's `Handle` (cgroup fs, resource
executor, evictor) through `bind_handle` like the built-ins.

The in-tree table is the same name → "module" list pyproject.toml declares for
nodeqos itself; it is not read back from the installed metadata because that
may describe another checkout (a shared virtual environment whose editable
install points at another git worktree, as hack/with-env.sh allows): the
nodeqos distribution's installed entry points are skipped in favour of the
table, every other distribution's are added.

An entry point that cannot be loaded (its import raises, or its object lacks
part of the surface) and a name two distributions both claim are recorded as
broken (`PluginRegistry.broken()`), logged, and do not stop the agent: only
enabling that plugin is an error, naming it and the reason.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from qosmanager import features, framework

log = logging.getLogger(__name__)

GROUP = "nodeqos.agent.qos_plugins"
DISTRIBUTION = "nodeqos"  # whose installed entry points IN_TREE stands in for


def installed(group: str = GROUP) -> list[importlib.metadata.EntryPoint]:
    """The entry points of `group` that other distributions than nodeqos declare."""
    found = []
    for entry_point in importlib.metadata.entry_points(group=group):
        dist = entry_point.dist
        if dist is not None and _normalized(dist.name) == DISTRIBUTION:
            continue  # nodeqos's own: IN_TREE is the authoritative copy
        found.append(entry_point)
    return found


def registry(
    in_tree: Mapping[str, str],
    extra: Iterable[object] = (),
    *,
    entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
) -> framework.PluginRegistry:
    """In-tree strategies, then installed entry points, then `extra` objects.

    `entry_points` replaces the installed ones (tests); None reads them. An
    in-tree plugin that fails to load is a bug of this checkout and raises.
    """
    found = framework.PluginRegistry()
    origins: dict[str, str] = {}
    for name, value in in_tree.items():
        entry_point = importlib.metadata.EntryPoint(name, value, GROUP)
        origins[name] = "nodeqos (in-tree)"
        register_object(found, entry_point.load(), where=f"in-tree {value}", builtin=True)
    for entry_point in installed() if entry_points is None else entry_points:
        _add_entry_point(found, origins, entry_point)
    for obj in extra:  # the embedder's own code: a mistake here is a programming error
        register_object(found, obj, where=f"passed in ({getattr(obj, '__name__', obj)!r})")
    return found


def register_object(
    registry: framework.PluginRegistry, obj: object, *, where: str, builtin: bool = False
) -> framework.Registration:
    """Build and register the plugin `obj` describes; a wrong surface raises ValueError."""
    name = getattr(obj, "NAME", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: a QoS plugin must export NAME, a non-empty str")
    problems = []
    spec = getattr(obj, "FEATURE", None)
    if not isinstance(spec, features.FeatureSpec):
        problems.append("FEATURE, a qosmanager.FeatureSpec")
    factory = getattr(obj, "factory", None)
    if not callable(factory):
        problems.append("factory(), returning the plugin")
    if problems:
        raise ValueError(f"QoS plugin {name} ({where}) must export {'; '.join(problems)}")
    assert isinstance(spec, features.FeatureSpec) and callable(factory)  # checked above
    plugin = factory()
    missing = [m for m in ("init_flags", "setup", "run") if not callable(getattr(plugin, m, None))]
    if missing:
        raise ValueError(
            f"QoS plugin {name} ({where}): factory() returned {type(plugin).__name__},"
            f" which lacks {', '.join(missing)}() of qosmanager.ExtensionPlugin"
        )
    return registry.register(name, spec, plugin, builtin=builtin)


def _add_entry_point(
    registry: framework.PluginRegistry,
    origins: dict[str, str],
    entry_point: importlib.metadata.EntryPoint,
) -> None:
    name, origin = entry_point.name, _origin(entry_point)
    if name in origins:
        detail = (
            f"QoS plugin {name} is declared by {origins[name]} and by {origin};"
            " uninstall one of them"
        )
        log.error("%s", detail)
        registry.register_broken(name, detail)
        return
    origins[name] = origin
    where = f"entry point {name} = {entry_point.value} of {origin}"
    try:
        obj: Any = entry_point.load()
        if getattr(obj, "NAME", None) != name:
            raise ValueError(
                f"the entry point's name must be the plugin's NAME (got {getattr(obj, 'NAME', None)!r})"
            )
        register_object(registry, obj, where=where)
    except Exception as err:  # a third party's import: anything can happen, isolate it
        detail = f"{where} cannot be loaded: {type(err).__name__}: {err}"
        log.error("%s", detail)
        registry.register_broken(name, detail)


def _origin(entry_point: importlib.metadata.EntryPoint) -> str:
    dist = entry_point.dist
    return "an unknown distribution" if dist is None else f"{dist.name} {dist.version}"


def _normalized(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")
