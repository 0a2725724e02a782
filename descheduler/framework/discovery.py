"""Finding plugins: entry points of group `nodeqos.descheduler.plugins` into a Registry.

A plugin is any importable object (normally its package) exporting the surface
every in-tree plugin package exports:

    NAME: str                                # the name profiles use
    Args: type[config.PluginArgs]            # decoded and validated by the config loader
    EXTENSION_POINTS: frozenset[ExtensionPoint]
    factory(args, handle) -> plugin          # the plugin object the framework calls

A package makes it known by declaring an entry point (pytest and flake8 find
their plugins the same way):

    [project.entry-points."nodeqos.descheduler.plugins"]
    RecentRestarts = "recentrestarts"        # name = "module" or "module:object"

`registry(in_tree, extra)` is the one path every plugin takes: the in-tree
table, every installed entry point and the `extra` objects an embedder passes
(`descheduler.run(argv, plugins=[...])`) all go through `register_object`.

The in-tree plugins are `descheduler.plugins.IN_TREE`, the table pyproject.toml
declares as nodeqos's own entry points, loaded as `EntryPoint` objects exactly
as installed ones are; `kube.entrypoints` says why not from the installed
metadata, and why no name can be claimed twice silently.

A plugin that cannot be loaded (its import raises, or the object lacks part of
the surface) does not stop discovery: it is registered as broken, its config
still loads (its args kept as written, unchecked: `RawArgs`), and a profile
that enables it is reported and left out at start-up while the other profiles
run (`framework.profiles`). Only the profiles that name it pay for it.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Self

from descheduler.config import ENTRY_POINT_GROUP, ExtensionPoint, FieldPath, PluginArgs
from descheduler.framework.registry import Registry, RegistryError
from kube import entrypoints
from kube.configstruct import Errors

GROUP = ENTRY_POINT_GROUP


@dataclass(frozen=True, slots=True)
class RawArgs(PluginArgs):
    """The args of a plugin that could not be loaded: kept as written, not checked.

    Its profile will not start (the plugin is reported broken), so nothing reads
    them; keeping them lets the rest of the file load and `--write-config-to`
    write them back unchanged.
    """

    KIND: ClassVar[str] = ""
    raw: Mapping[str, object]

    @classmethod
    def decode_mapping(
        cls, raw: Mapping[str, object], path: FieldPath, errors: Errors
    ) -> Self | None:
        return cls(dict(raw))

    def to_mapping(self) -> dict[str, object]:
        return dict(self.raw)


def registry(
    in_tree: Mapping[str, str],
    extra: Iterable[object] = (),
    *,
    entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
) -> Registry:
    """In-tree plugins, then installed entry points, then `extra` objects
    (`kube.entrypoints.discover`); `entry_points` replaces the installed ones (tests)."""
    found = Registry()
    entrypoints.discover(
        GROUP,
        in_tree,
        extra,
        kind="descheduler plugin",
        register=lambda obj, where, _builtin: register_object(found, obj, where=where),
        register_broken=lambda name, reason: found.register_broken(name, reason, args=RawArgs),
        entry_points=entry_points,
        error=RegistryError,
    )
    return found


def register_object(registry: Registry, obj: object, *, where: str) -> None:
    """Register a plugin object; a missing or wrong part of its surface is a RegistryError."""
    name, surface = entrypoints.surface(
        obj,
        (
            (
                "Args",
                lambda args: isinstance(args, type) and issubclass(args, PluginArgs),
                "Args, a subclass of descheduler.config.PluginArgs",
            ),
            entrypoints.extension_points(ExtensionPoint, "config.ExtensionPoint"),
            entrypoints.FACTORY,
        ),
        where=where,
        kind="plugin",
        error=RegistryError,
    )
    registry.register(
        name,
        surface["factory"],
        args=surface["Args"],
        extension_points=frozenset(surface["EXTENSION_POINTS"]),
    )
