"""Declarative JSON codec for Koordinator-style config structs (used by `kube.nodeslo`).

Koordinator's NodeSLO is dozens of small Go structs of optional fields. Rather
than hand-write `from_api`/`to_api` for each, a struct here is a frozen
dataclass whose fields all default to None (unset) and carry their wire name,
kind and range in `dataclasses.field` metadata; three functions do the rest:

- `encode(obj)`: JSON with unset fields omitted (Go's ``omitempty`` on pointers);
- `decode(cls, raw, path, errors)`: never raises; a field with a wrong type, an
  out-of-range value or an unknown choice is reported with its path and left
  unset, as is an unknown key; JSON null means unset;
- `merge(base, override)`: what Go's ``json.Unmarshal`` of the override onto the
  base does: set fields win, nested structs and JSON objects merge key by key,
  lists and scalars replace.

Kinds: ``int`` (rules `lo`, `hi`), ``bool``, ``str`` (rule `choices`),
``quantity`` (a Kubernetes quantity, kept as written), ``json`` / ``json-list``
(opaque, deep-copied in and out), or a struct class (nested).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from kube import quantity

__all__ = ["decode", "encode", "merge", "meta", "opt"]

_T = TypeVar("_T")
_SCALARS = frozenset({"int", "bool", "str", "quantity"})
_OPAQUE = frozenset({"json", "json-list"})


def meta(wire: str, kind: str | type[Any] = "int", **rules: Any) -> dict[str, Any]:
    """Field metadata: `field(default=None, metadata=meta("cpuQOS", CPUQOSCfg))`."""
    return {"wire": wire, "kind": kind, **rules}


def opt(wire: str, kind: str = "int", **rules: Any) -> Any:
    """An optional scalar field, unset by default: `x: int | None = opt("x", lo=0)`."""
    return dataclasses.field(default=None, metadata=meta(wire, kind, **rules))


def encode(obj: Any) -> dict[str, Any]:
    """The JSON object of a struct, unset fields omitted."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if value is None:
            continue
        kind = f.metadata["kind"]
        if kind in _SCALARS:
            out[f.metadata["wire"]] = value
        elif kind in _OPAQUE:
            out[f.metadata["wire"]] = copy.deepcopy(
                list(value) if kind == "json-list" else dict(value)
            )
        else:
            out[f.metadata["wire"]] = encode(value)
    return out


def _problem(rules: Mapping[str, Any], value: Any) -> str | None:
    """Why a scalar or opaque value is unusable, or None when it is fine."""
    kind, lo, hi, choices = rules["kind"], rules.get("lo"), rules.get("hi"), rules.get("choices")
    if kind == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            return "must be an integer"
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            if lo is not None and hi is not None:
                return f"must be within [{lo}, {hi}]"
            return f"must be >= {lo}" if lo is not None else f"must be <= {hi}"
    elif kind == "bool" and not isinstance(value, bool):
        return "must be a boolean"
    elif kind == "str" and (not isinstance(value, str) or (choices and value not in choices)):
        return f"must be one of {', '.join(choices)}" if choices else "must be a string"
    elif kind == "quantity":
        try:
            quantity.parse_quantity(value)
        except ValueError:
            return f"invalid quantity {value!r}"
    elif kind == "json" and not isinstance(value, Mapping):
        return "must be an object"
    elif kind == "json-list" and not isinstance(value, list):
        return "must be a list"
    return None


def decode(cls: type[_T], raw: Any, path: str, errors: list[str]) -> _T:
    """A struct from JSON; every problem is appended to `errors` as "path: what"."""
    if not isinstance(raw, Mapping):
        errors.append(f"{path}: must be an object")
        return cls()
    by_wire = {f.metadata["wire"]: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    for key, value in raw.items():
        f, where = by_wire.get(key), f"{path}.{key}"
        if f is None:
            errors.append(f"{where}: unknown field")
            continue
        kind = f.metadata["kind"]
        if value is None:
            continue
        if isinstance(kind, type):
            values[f.name] = decode(kind, value, where, errors)
        elif (problem := _problem(f.metadata, value)) is not None:
            errors.append(f"{where}: {problem}")
        else:
            values[f.name] = copy.deepcopy(value) if kind in _OPAQUE else value
    return cls(**values)


def merge(base: _T, override: _T) -> _T:
    """`override` applied over `base` (see the module docstring)."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(override):  # type: ignore[arg-type]
        new, old = getattr(override, f.name), getattr(base, f.name)
        if new is None:
            continue
        if old is not None and isinstance(f.metadata["kind"], type):
            new = merge(old, new)
        elif isinstance(old, Mapping) and isinstance(new, Mapping):
            new = _merge_json(old, new)
        changes[f.name] = new
    return dataclasses.replace(base, **changes)  # type: ignore[type-var]


def _merge_json(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(old)
    for key, value in new.items():
        prev = out.get(key)
        if isinstance(prev, Mapping) and isinstance(value, Mapping):
            out[key] = _merge_json(prev, value)
        else:
            out[key] = copy.deepcopy(value)
    return out
