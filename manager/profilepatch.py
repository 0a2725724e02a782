"""A ClusterColocationProfile's `patch` (a strategic merge patch of the pod) as admission-policy
mutations, pure. Called by `manager.colocationprofile`.

Koordinator applies `spec.patch` with `strategicpatch.StrategicMergePatch` against the pod
(`pkg/webhook/pod/mutating/cluster_colocation_profile.go`, after every other field of the
profile). A `MutatingAdmissionPolicy` has two patch types: an `ApplyConfiguration` (merged
like server-side apply: maps key by key, structs field by field, lists with keys item by
item) and `JSONPatch`. Where a field's strategic-merge semantics equal the apply semantics
the patch becomes an apply configuration; a list the strategic merge replaces whole
(no `patchStrategy`, e.g. `spec.tolerations`) becomes a JSONPatch `add`, which replaces the
list. Everything else is refused with its field path rather than applied differently:
`$patch`/`$retainKeys`/`$setElementOrder` directives, `null` (deletion), other metadata,
`status`, and any struct or list not in `_SHAPES` (its merge semantics are not mapped here;
an apply configuration that touches an atomic struct fails at admission, which with
`failurePolicy: Ignore` would silently drop the whole profile).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_CONTAINERS = ("spec.containers", "spec.initContainers")
# Field path (list items collapsed) -> shape. "map": string map, merged key by key;
# "struct": fields merged; "list:<key>": merged item by item on <key>; "replace": an atomic
# list directly under spec, replaced whole by the strategic merge and by JSONPatch add;
# "merge-atomic-map": a map directly under spec that the API declares atomic (an apply
# configuration may not touch it) but the strategic merge merges: JSONPatch, key by key.
_SHAPES: dict[str, str] = {
    "metadata": "struct",
    "metadata.labels": "map",
    "metadata.annotations": "map",
    "spec": "struct",
    "spec.nodeSelector": "merge-atomic-map",
    "spec.tolerations": "replace",
    **{c: "list:name" for c in _CONTAINERS},
    **{f"{c}.env": "list:name" for c in _CONTAINERS},
    **{f"{c}.volumeMounts": "list:mountPath" for c in _CONTAINERS},
    **{f"{c}.resources": "struct" for c in _CONTAINERS},
    **{f"{c}.resources.{s}": "map" for c in _CONTAINERS for s in ("requests", "limits")},
}
# Scalars (strings, integers, booleans) are taken in any struct above except metadata.
_NO_SCALARS = frozenset({"metadata"})


def _cel(value: Any) -> str:
    return json.dumps(value)  # a JSON string, integer or boolean is a CEL literal


def mutations(patch: Any, errors: list[str]) -> list[dict[str, Any]]:
    """The mutations applying `patch`; every part that cannot be rendered appends an error
    naming its field (under `spec.patch`) and nothing is returned for it."""
    if not patch:
        return []
    if not isinstance(patch, Mapping):
        errors.append("spec.patch: must be an object (a strategic merge patch of the pod)")
        return []
    replaced: list[str] = []
    parts: list[str] = []
    for key, value in patch.items():
        if key not in ("metadata", "spec"):
            errors.append(f"spec.patch.{key}: only metadata and spec can be patched")
            continue
        rendered = _value(key, key, value, errors, replaced)
        if rendered is not None:
            parts.append(f"{key}: {rendered}")
    found: list[dict[str, Any]] = []
    if parts:
        found.append(
            {
                "patchType": "ApplyConfiguration",
                "applyConfiguration": {"expression": "Object{" + ", ".join(parts) + "}"},
            }
        )
    if replaced:
        found.append({"patchType": "JSONPatch", "jsonPatch": {"expression": " + ".join(replaced)}})
    return found


def _value(
    shape_path: str, field: str, value: Any, errors: list[str], replaced: list[str]
) -> str | None:
    """CEL for `value` at `shape_path` (list items collapsed); `field` is its full path."""
    where = f"spec.patch.{field}"
    if value is None:
        errors.append(f"{where}: null (delete) cannot be expressed as an apply configuration")
        return None
    shape = _SHAPES.get(shape_path)
    if shape is None:
        if isinstance(value, (Mapping, list)):
            errors.append(f"{where}: not rendered (its merge semantics are not mapped)")
            return None
        if isinstance(value, float) or shape_path.split(".")[0] in _NO_SCALARS:
            errors.append(f"{where}: not rendered (only strings, integers and booleans)")
            return None
        return _cel(value)
    if shape == "map":
        return _map(where, value, errors)
    if shape == "replace":
        if not isinstance(value, list):
            errors.append(f"{where}: must be a list")
            return None
        path = "/" + field.replace(".", "/")
        replaced.append(f"[JSONPatch{{op: 'add', path: {_cel(path)}, value: {_cel(value)}}}]")
        return None
    if shape == "merge-atomic-map":
        rendered = _map(where, value, errors)
        if rendered is not None:
            path = "/" + field.replace(".", "/")
            keys = " + ".join(
                f"[JSONPatch{{op: 'add', path: {_cel(path + '/' + _pointer(str(k)))},"
                f" value: {_cel(str(v))}}}]"
                for k, v in value.items()
            )
            replaced.append(
                f"(has(object.{field}) ? {keys} :"
                f" [JSONPatch{{op: 'add', path: {_cel(path)}, value: {rendered}}}])"
            )
        return None
    if shape.startswith("list:"):
        return _list(shape_path, field, shape[5:], value, errors, replaced)
    return _struct(shape_path, field, value, errors, replaced)


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _map(where: str, value: Any, errors: list[str]) -> str | None:
    if not isinstance(value, Mapping):
        errors.append(f"{where}: must be a map")
        return None
    bad = [k for k, v in value.items() if v is None or isinstance(v, (Mapping, list, bool, float))]
    if bad:
        errors.append(f"{where}.{bad[0]}: must be a string (null deletes, which is not rendered)")
        return None
    return "{" + ", ".join(f"{_cel(str(k))}: {_cel(str(v))}" for k, v in value.items()) + "}"


def _struct(
    shape_path: str, field: str, value: Any, errors: list[str], replaced: list[str]
) -> str | None:
    where = f"spec.patch.{field}"
    if not isinstance(value, Mapping):
        errors.append(f"{where}: must be an object")
        return None
    fields: list[str] = []
    for key, item in value.items():
        if str(key).startswith("$"):
            errors.append(f"{where}.{key}: strategic-merge directives are not rendered")
            continue
        rendered = _value(f"{shape_path}.{key}", f"{field}.{key}", item, errors, replaced)
        if rendered is not None:
            fields.append(f"{key}: {rendered}")
    if not fields:
        return None
    return f"Object.{shape_path}{{" + ", ".join(fields) + "}"


def _list(
    shape_path: str, field: str, key: str, value: Any, errors: list[str], replaced: list[str]
) -> str | None:
    where = f"spec.patch.{field}"
    if not isinstance(value, list):
        errors.append(f"{where}: must be a list")
        return None
    items: list[str] = []
    for i, item in enumerate(value):
        if not isinstance(item, Mapping) or key not in item:
            errors.append(f"{where}[{i}]: needs its merge key {key!r}")
            continue
        before = len(errors)
        rendered = _struct(shape_path, f"{field}[{i}]", item, errors, replaced)
        if rendered is not None and len(errors) == before:
            items.append(rendered)
    return "[" + ", ".join(items) + "]" if items else None
