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

Why the in-tree plugins come from a table and not from the installed metadata:
`importlib.metadata` reads the `*.dist-info` that `pip install` wrote, which
can describe another checkout than the code being run - a shared virtual
environment whose editable install points at one git worktree while
PYTHONPATH runs another (hack/with-env.sh does exactly that), or a source tree
run before it is reinstalled. Its list of in-tree plugins would then be stale
(a plugin added in this checkout missing, a removed one present). So the
in-tree plugins are `descheduler.plugins.IN_TREE`, the same name → "module"
table pyproject.toml declares as nodeqos's own entry points (a test keeps the
two equal), loaded as `EntryPoint` objects exactly as installed ones are; the
installed entry points of the nodeqos distribution itself are skipped, and
those of every other distribution are added. An out-of-tree plugin cannot
take an in-tree name and two distributions cannot both claim one: the name
is then registered as broken, naming both claimants, so neither wins silently.

A plugin that cannot be loaded (its import raises, or the object lacks part of
the surface) does not stop discovery: it is registered as broken, its config
still loads (its args kept as written, unchecked: `RawArgs`), and a profile
that enables it is reported and left out at start-up while the other profiles
run (`framework.profiles`). Only the profiles that name it pay for it.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Self

from descheduler.config import ENTRY_POINT_GROUP, ExtensionPoint, FieldPath, PluginArgs
from descheduler.framework.registry import Registry, RegistryError
from kube.configstruct import Errors, describe

log = logging.getLogger(__name__)

GROUP = ENTRY_POINT_GROUP
DISTRIBUTION = "nodeqos"  # whose installed entry points IN_TREE stands in for


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
    def decode(cls, raw: object, path: FieldPath, errors: Errors) -> Self | None:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            errors.add(path, f"must be a mapping, not {describe(raw)}")
            return None
        return cls(dict(raw))

    def to_mapping(self) -> dict[str, object]:
        return dict(self.raw)


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
) -> Registry:
    """In-tree plugins, then installed entry points, then `extra` objects.

    `entry_points` replaces the installed ones (tests); None reads them. The
    in-tree table is loaded as entry points too; one of them failing to load
    is a bug of this checkout, not a user's plugin, and raises.
    """
    found = Registry()
    origins: dict[str, str] = {}
    for name, value in in_tree.items():
        entry_point = importlib.metadata.EntryPoint(name, value, GROUP)
        origins[name] = "nodeqos (in-tree)"
        _register_entry_point(found, entry_point, where=f"in-tree entry point {name} = {value}")
    for entry_point in installed() if entry_points is None else entry_points:
        _add_entry_point(found, origins, entry_point, _origin(entry_point))
    for obj in extra:  # the embedder's own code: a mistake here is a programming error
        register_object(found, obj, where=f"passed in ({getattr(obj, '__name__', obj)!r})")
    return found


def register_object(registry: Registry, obj: object, *, where: str) -> None:
    """Register a plugin object; a missing or wrong part of its surface is a RegistryError."""
    name = getattr(obj, "NAME", None)
    if not isinstance(name, str) or not name:
        raise RegistryError(f"{where}: a plugin must export NAME, a non-empty str")
    problems = []
    args = getattr(obj, "Args", None)
    if not (isinstance(args, type) and issubclass(args, PluginArgs)):
        problems.append("Args, a subclass of descheduler.config.PluginArgs")
        args = None
    points = getattr(obj, "EXTENSION_POINTS", None)
    if not (
        isinstance(points, frozenset | set)
        and points
        and all(isinstance(p, ExtensionPoint) for p in points)
    ):
        problems.append("EXTENSION_POINTS, a non-empty frozenset of config.ExtensionPoint")
        points = None
    factory = getattr(obj, "factory", None)
    if not callable(factory):
        problems.append("factory(args, handle), a callable")
    if problems or args is None or points is None:
        raise RegistryError(f"plugin {name} ({where}) must export {'; '.join(problems)}")
    registry.register(name, factory, args=args, extension_points=frozenset(points))


def _register_entry_point(
    registry: Registry, entry_point: importlib.metadata.EntryPoint, *, where: str
) -> None:
    """Load the entry point's object and register it under the entry point's name."""
    obj = entry_point.load()
    found = getattr(obj, "NAME", None)
    if found != entry_point.name:
        raise RegistryError(f"the entry point's name must be the plugin's NAME (got {found!r})")
    register_object(registry, obj, where=where)


def _add_entry_point(
    registry: Registry,
    origins: dict[str, str],
    entry_point: importlib.metadata.EntryPoint,
    origin: str,
) -> None:
    name = entry_point.name
    if name in origins:  # neither wins silently: profiles naming it are reported
        registry.register_broken(
            name,
            f"descheduler plugin {name} is declared by {origins[name]} and by {origin};"
            " uninstall one of them",
            args=RawArgs,
        )
        return
    origins[name] = origin
    where = f"entry point {name} = {entry_point.value} of {origin}"
    try:
        _register_entry_point(registry, entry_point, where=where)
    except Exception as err:  # a third party's import: anything can happen, isolate it
        detail = f"{where} cannot be loaded: {type(err).__name__}: {err}"
        log.debug("%s", detail)
        registry.register_broken(name, detail, args=RawArgs)


def _origin(entry_point: importlib.metadata.EntryPoint) -> str:
    dist = entry_point.dist
    return "an unknown distribution" if dist is None else f"{dist.name} {dist.version}"


def _normalized(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")
