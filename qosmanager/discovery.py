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
from collections.abc import Iterable, Mapping

from kube import entrypoints
from qosmanager import features, framework

GROUP = "nodeqos.agent.qos_plugins"


def registry(
    in_tree: Mapping[str, str],
    extra: Iterable[object] = (),
    *,
    entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
) -> framework.PluginRegistry:
    """In-tree strategies, then installed entry points, then `extra` objects
    (`kube.entrypoints.discover`); `entry_points` replaces the installed ones (tests)."""
    found = framework.PluginRegistry()
    entrypoints.discover(
        GROUP,
        in_tree,
        extra,
        kind="QoS plugin",
        register=lambda obj, where, builtin: register_object(
            found, obj, where=where, builtin=builtin
        ),
        register_broken=found.register_broken,
        entry_points=entry_points,
    )
    return found


def register_object(
    registry: framework.PluginRegistry, obj: object, *, where: str, builtin: bool = False
) -> framework.Registration:
    """Build and register the plugin `obj` describes; a wrong surface raises ValueError."""
    name, surface = entrypoints.surface(
        obj,
        (
            (
                "FEATURE",
                lambda spec: isinstance(spec, features.FeatureSpec),
                "FEATURE, a qosmanager.FeatureSpec",
            ),
            ("factory", callable, "factory(), returning the plugin"),
        ),
        where=where,
        kind="QoS plugin",
    )
    spec: features.FeatureSpec = surface["FEATURE"]
    plugin = surface["factory"]()
    missing = [m for m in ("init_flags", "setup", "run") if not callable(getattr(plugin, m, None))]
    if missing:
        raise ValueError(
            f"QoS plugin {name} ({where}): factory() returned {type(plugin).__name__},"
            f" which lacks {', '.join(missing)}() of qosmanager.ExtensionPlugin"
        )
    return registry.register(name, spec, plugin, builtin=builtin)
