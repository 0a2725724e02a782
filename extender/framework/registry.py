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
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from extender.framework.interfaces import GROUP, ExtensionPoint

log = logging.getLogger(__name__)

DISTRIBUTION = "nodeqos"

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
    name = getattr(obj, "NAME", None)
    if not isinstance(name, str) or not name:
        raise RegistryError(f"{where}: a scheduler plugin must export NAME, a non-empty str")
    problems = []
    args = getattr(obj, "Args", None)
    if not (isinstance(args, type) and callable(getattr(args, "from_mapping", None))):
        problems.append("Args, a type with from_mapping(raw, path)")
    points = getattr(obj, "EXTENSION_POINTS", None)
    if not (
        isinstance(points, frozenset | set)
        and points
        and all(isinstance(p, ExtensionPoint) for p in points)
    ):
        problems.append("EXTENSION_POINTS, a non-empty frozenset of ExtensionPoint")
    factory = getattr(obj, "factory", None)
    if not callable(factory):
        problems.append("factory(args, handle), a callable")
    if problems:
        raise RegistryError(f"scheduler plugin {name} ({where}) must export {'; '.join(problems)}")
    return Entry(name, args, frozenset(points), factory)  # type: ignore[arg-type]


def installed(group: str = GROUP) -> list[importlib.metadata.EntryPoint]:
    """The entry points of `group` that distributions other than nodeqos declare."""
    found = []
    for entry_point in importlib.metadata.entry_points(group=group):
        dist = entry_point.dist
        if dist is not None and _normalized(dist.name) == DISTRIBUTION:
            continue
        found.append(entry_point)
    return found


def discover(
    in_tree: Mapping[str, str],
    extra: Iterable[object] = (),
    *,
    entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
) -> Registry:
    """In-tree plugins, then installed entry points (`entry_points` replaces them), then `extra`.

    An in-tree plugin failing to load is a bug of this checkout and raises; an
    installed one is registered broken.
    """
    found = Registry()
    origins: dict[str, str] = {}
    for name, value in in_tree.items():
        entry_point = importlib.metadata.EntryPoint(name, value, GROUP)
        origins[name] = "nodeqos (in-tree)"
        found.register(_load(entry_point, where=f"in-tree entry point {name} = {value}"))
    for entry_point in installed() if entry_points is None else entry_points:
        name = entry_point.name
        dist = entry_point.dist
        origin = "an unknown distribution" if dist is None else f"{dist.name} {dist.version}"
        if name in origins:
            found.register(
                _broken(
                    name,
                    f"scheduler plugin {name} is declared by {origins[name]} and by {origin};"
                    " uninstall one of them",
                )
            )
            continue
        origins[name] = origin
        where = f"entry point {name} = {entry_point.value} of {origin}"
        try:
            found.register(_load(entry_point, where=where))
        except Exception as err:  # a third party's import: anything can happen; isolate it
            found.register(_broken(name, f"{where} cannot be loaded: {type(err).__name__}: {err}"))
    for obj in extra:  # the embedder's own code: a mistake is a programming error
        found.register(entry_of(obj, where=f"passed in ({getattr(obj, '__name__', obj)!r})"))
    return found


def _load(entry_point: importlib.metadata.EntryPoint, *, where: str) -> Entry:
    obj = entry_point.load()
    if getattr(obj, "NAME", None) != entry_point.name:
        raise RegistryError(
            f"{where}: the entry point's name must be the plugin's NAME"
            f" (got {getattr(obj, 'NAME', None)!r})"
        )
    return entry_of(obj, where=where)


def _broken(name: str, error: str) -> Entry:
    log.debug("%s", error)
    return Entry(name, None, frozenset(ExtensionPoint), None, error)


def _normalized(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")
