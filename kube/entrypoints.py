"""Plugin discovery through entry points, one path for every plugin framework of nodeqos.

The descheduler (`nodeqos.descheduler.plugins`), the scheduler extender
(`nodeqos.scheduler.plugins`) and the agent's QoS framework
(`nodeqos.agent.qos_plugins`) find plugins the same way; each states only what
a plugin object must export (its `register`) and how it records a broken one.
`discover` feeds them, in order (and `surface` is the one check of what an object
exports, so that every framework reports a wrong one alike):

1. the in-tree table, name → "module" or "module:object", the same table
   pyproject.toml declares as nodeqos's own entry points (a test per framework
   keeps the two equal). It is loaded as `EntryPoint` objects, exactly as an
   installed one, and not read back from the installed metadata: that can
   describe another checkout than the code being run (a shared virtual
   environment whose editable install points at one git worktree while
   PYTHONPATH runs another, as hack/with-env.sh allows). An in-tree plugin that
   fails to load is a bug of this checkout, and raises;
2. every installed entry point of the group that another distribution than
   nodeqos declares (nodeqos's own are the table above). One that cannot be
   loaded (its import raises, its object lacks part of the surface, its name is
   not its entry point's) or whose name another distribution already claims is
   registered broken with the reason, and logged once as a warning: neither
   claimant wins silently, and only what enables it pays for it;
3. the objects an embedder passes (`descheduler.run(argv, plugins=[...])`):
   its own code, where a mistake is a programming error and raises.

May import: nothing of ours (a foundation).
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

log = logging.getLogger(__name__)

DISTRIBUTION = "nodeqos"  # whose installed entry points the in-tree table stands in for
IN_TREE_ORIGIN = "nodeqos (in-tree)"

# register(obj, where, builtin): check the object's surface and register it, or raise
# (what it returns is not used).
Register = Callable[[object, str, bool], object]
# register_broken(name, reason): record a plugin that cannot be used, and why.
RegisterBroken = Callable[[str, str], None]
# (attribute, whether its value will do, what it must be, for the message).
Requirement = tuple[str, Callable[[Any], bool], str]


def installed(group: str) -> list[importlib.metadata.EntryPoint]:
    """The entry points of `group` that other distributions than nodeqos declare."""
    found = []
    for entry_point in importlib.metadata.entry_points(group=group):
        dist = entry_point.dist
        if dist is not None and _normalized(dist.name) == DISTRIBUTION:
            continue  # nodeqos's own: the in-tree table is the authoritative copy
        found.append(entry_point)
    return found


def discover(
    group: str,
    in_tree: Mapping[str, str],
    extra: Iterable[object],
    *,
    kind: str,
    register: Register,
    register_broken: RegisterBroken,
    entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
    error: type[Exception] = ValueError,
) -> None:
    """Feed the in-tree table, the installed entry points (`entry_points` replaces
    them, for tests) and `extra` into `register`, in that order.

    `kind` names the plugins in messages ("descheduler plugin"); `error` is the
    exception a wrong entry point name raises (the framework's own).
    """
    origins: dict[str, str] = {}
    for name, value in in_tree.items():
        entry_point = importlib.metadata.EntryPoint(name, value, group)
        origins[name] = IN_TREE_ORIGIN
        where = f"in-tree entry point {name} = {value}"
        register(load(entry_point, where=where, error=error), where, True)
    for entry_point in installed(group) if entry_points is None else entry_points:
        name, origin = entry_point.name, _origin(entry_point)
        if name in origins:
            reason = (
                f"{kind} {name} is declared by {origins[name]} and by {origin};"
                " uninstall one of them"
            )
        else:
            origins[name] = origin
            where = f"entry point {name} = {entry_point.value} of {origin}"
            try:
                register(load(entry_point, where=where, error=error), where, False)
                continue
            except Exception as err:  # a third party's import: anything can happen, isolate it
                reason = f"{where} cannot be loaded: {type(err).__name__}: {err}"
        log.warning("%s", reason)
        register_broken(name, reason)
    for obj in extra:
        register(obj, f"passed in ({getattr(obj, '__name__', obj)!r})", False)


def surface(
    obj: object,
    requires: Iterable[Requirement],
    *,
    where: str,
    kind: str,
    error: type[Exception] = ValueError,
) -> tuple[str, dict[str, Any]]:
    """The NAME of the plugin object `obj` and the attributes `requires` names, checked.

    A NAME that is not a non-empty str raises `error` at once; otherwise every
    attribute that will not do is named in one `error`: "<kind> <NAME> (<where>)
    must export <what>; <what>".
    """
    name = getattr(obj, "NAME", None)
    if not isinstance(name, str) or not name:
        raise error(f"{where}: a {kind} must export NAME, a non-empty str")
    values: dict[str, Any] = {}
    problems = []
    for attribute, will_do, what in requires:
        value = getattr(obj, attribute, None)
        if will_do(value):
            values[attribute] = value
        else:
            problems.append(what)
    if problems:
        raise error(f"{kind} {name} ({where}) must export {'; '.join(problems)}")
    return name, values


def extension_points(point: type, spelled: str) -> Requirement:
    """EXTENSION_POINTS, a non-empty set of `point` members (`spelled` names `point`)."""

    def will_do(value: object) -> bool:
        return (
            isinstance(value, frozenset | set)
            and bool(value)
            and all(isinstance(member, point) for member in value)
        )

    return ("EXTENSION_POINTS", will_do, f"EXTENSION_POINTS, a non-empty frozenset of {spelled}")


# The factory of a plugin built from its args and a handle (the descheduler's, the extender's).
FACTORY: Requirement = ("factory", callable, "factory(args, handle), a callable")


def load(
    entry_point: importlib.metadata.EntryPoint, *, where: str, error: type[Exception] = ValueError
) -> object:
    """The entry point's object, whose NAME must be the entry point's name (`where` says
    which entry point, for an in-tree one whose error propagates)."""
    obj: object = entry_point.load()
    found = getattr(obj, "NAME", None)
    if found != entry_point.name:
        message = f"the entry point's name must be the plugin's NAME (got {found!r})"
        raise error(message if where.startswith("entry point") else f"{where}: {message}")
    return obj


def _origin(entry_point: importlib.metadata.EntryPoint) -> str:
    dist = entry_point.dist
    return "an unknown distribution" if dist is None else f"{dist.name} {dist.version}"


def _normalized(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")
