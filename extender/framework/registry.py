"""Finding scheduler plugins: the entry-point group `nodeqos.scheduler.plugins` into a Registry.

A plugin is an importable object (normally its package) exporting:

    NAME: str                                    # the name profiles use
    Args: type with from_mapping(raw, path)      # raises ArgsError listing every problem
    EXTENSION_POINTS: frozenset[ExtensionPoint]  # filter, score
    factory(args, handle) -> plugin              # the object the framework calls

and is declared by its distribution:

    [project.entry-points."nodeqos.scheduler.plugins"]
    BEMemoryGuard = "nodeqos_bememguard"

The in-tree plugins come from `extender.plugins.IN_TREE`, the same table as
nodeqos's own pyproject.toml entry points, loaded as EntryPoint objects exactly
as installed ones are; nodeqos's own installed metadata is skipped because it
may describe another checkout (the descheduler's `framework.discovery` explains
why). A plugin that cannot be loaded, or a name two distributions claim, is
registered broken: a profile enabling it is a configuration error naming why.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from extender.framework.interfaces import GROUP, ExtensionPoint
from kube import entrypoints

Factory = Callable[[object, object], object]


class RegistryError(ValueError):
    """A plugin registered twice, or exporting an incomplete surface."""


@dataclass(frozen=True, slots=True)
class Entry:
    name: str
    args: type | None  # None when broken
    extension_points: frozenset[ExtensionPoint]
    factory: Factory | None
    error: str | None = None  # why a broken plugin could not be loaded


class Registry:
    """Plugins by name; registering a taken name raises."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}

    def register(self, entry: Entry) -> None:
        if entry.name in self._entries and entry.error is None:
            raise RegistryError(f"scheduler plugin name {entry.name!r} is already registered")
        self._entries[entry.name] = entry

    def get(self, name: str) -> Entry | None:
        return self._entries.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def broken(self) -> dict[str, str]:
        return {n: e.error for n, e in self._entries.items() if e.error is not None}


def entry_of(obj: object, *, where: str) -> Entry:
    """The registry entry of a plugin object; RegistryError names what its surface lacks."""
    name, surface = entrypoints.surface(
        obj,
        (
            (
                "Args",
                lambda args: (
                    isinstance(args, type) and callable(getattr(args, "from_mapping", None))
                ),
                "Args, a type with from_mapping(raw, path)",
            ),
            entrypoints.extension_points(ExtensionPoint, "ExtensionPoint"),
            entrypoints.FACTORY,
        ),
        where=where,
        kind="scheduler plugin",
        error=RegistryError,
    )
    return Entry(name, surface["Args"], frozenset(surface["EXTENSION_POINTS"]), surface["factory"])


def discover(
    in_tree: Mapping[str, str],
    extra: Iterable[object] = (),
    *,
    entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
) -> Registry:
    """In-tree plugins, then installed entry points (`entry_points` replaces them), then
    `extra` (`kube.entrypoints.discover`)."""
    found = Registry()
    entrypoints.discover(
        GROUP,
        in_tree,
        extra,
        kind="scheduler plugin",
        register=lambda obj, where, _builtin: found.register(entry_of(obj, where=where)),
        register_broken=lambda name, reason: found.register(
            Entry(name, None, frozenset(ExtensionPoint), None, reason)
        ),
        entry_points=entry_points,
        error=RegistryError,
    )
    return found
