"""Declarative config structs: field specs on dataclasses, field paths, every error collected.

The one config layer of nodeqos (the descheduler's config and plugin Args, the
extender's args, the manager's documents). A config dataclass names each
field's YAML/JSON key and codec (`kube.configcodecs`) in the field's metadata,
next to its default::

    @dataclass(frozen=True, kw_only=True, slots=True)
    class AnomalyCondition:
        timeout: timedelta = field(default=timedelta(minutes=1), metadata=spec("timeout", DURATION))

`decode_object` turns a mapping into such an object: it rejects unknown keys,
reports every bad field (keeping the field default so decoding can go on), and
then runs the object's own `check(path, errors, failed)` for rules that span
fields, telling it which keys failed so it does not judge stand-in defaults.
`encode_object` writes the object back.

Every problem becomes a `FieldError` whose path names the offending field the
way a user finds it in the file, e.g.
``profiles[0].pluginConfig[LowNodeLoad].args.highThresholds.cpu``; a load
collects all of them in one `Errors` list and raises one `ConfigError` at the
end, so a user fixes every mistake in one round instead of one per run.
Imports nothing of nodeqos outside `kube`.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

T = TypeVar("T")

# Map keys that read naturally after a dot (`highThresholds.cpu`); anything else
# (`nvidia.com/gpu`, keys with spaces) is shown in brackets.
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


@dataclass(frozen=True, slots=True)
class FieldPath:
    """A position in the configuration document, rendered as text by `str()`."""

    text: str = ""

    def child(self, name: str) -> FieldPath:
        """The field `name` of the object at this path."""
        return FieldPath(f"{self.text}.{name}" if self.text else name)

    def index(self, position: int) -> FieldPath:
        """The list element at `position`."""
        return FieldPath(f"{self.text}[{position}]")

    def named(self, name: str) -> FieldPath:
        """A list element addressed by its name, e.g. ``pluginConfig[LowNodeLoad]``."""
        return FieldPath(f"{self.text}[{name}]")

    def key(self, key: str) -> FieldPath:
        """The entry `key` of a map: ``.cpu``, or ``[nvidia.com/gpu]`` for unusual keys."""
        if _PLAIN_KEY.fullmatch(key):
            return self.child(key)
        return self.named(key)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem with one field."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ConfigError(Exception):
    """The configuration is unusable; `errors` lists every problem found."""

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(str(error) for error in self.errors)


class Invalid(Exception):
    """Raised by a codec for one problem at the path it was given."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class Reported(Exception):
    """Raised by a codec whose problems are already in the `Errors` list."""


class Errors:
    """The growing list of problems found during one load."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: list[FieldError] = []

    def add(self, path: FieldPath | str, message: str) -> None:
        self._items.append(FieldError(str(path), message))

    def extend(self, errors: Iterable[FieldError]) -> None:
        self._items.extend(errors)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[FieldError]:
        return iter(self._items)

    def raise_if_any(self) -> None:
        if self._items:
            raise ConfigError(self._items)


def describe(raw: object) -> str:
    """A short name for the YAML type of `raw`, for error messages."""
    if raw is None:
        return "null"
    if isinstance(raw, bool):
        return "a boolean"
    if isinstance(raw, int | float):
        return "a number"
    if isinstance(raw, str):
        return "a string"
    if isinstance(raw, Mapping):
        return "a mapping"
    if isinstance(raw, list):
        return "a list"
    return type(raw).__name__


class Codec(Generic[T]):
    """Reads one YAML value into a `T` and writes it back.

    `decode` returns the typed value, raises `Invalid` for a single problem at the
    path it was given, or records several problems itself (lists, maps, nested
    objects) and raises `Reported`. `encode` writes the value in the form `decode`
    reads, so a written configuration loads into an equal object.
    """

    __slots__ = ()

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> T:
        raise NotImplementedError

    def encode(self, value: T) -> object:
        raise NotImplementedError


ROOT = FieldPath()
_KEY = "yaml_key"
_CODEC = "yaml_codec"
_REQUIRED = "yaml_required"


def spec(key: str, codec: Codec[Any], *, required: bool = False) -> dict[str, object]:
    """Field metadata: read this field from key `key` with `codec`; `required` refuses a missing key."""
    return {_KEY: key, _CODEC: codec, _REQUIRED: required}


class _Spec(NamedTuple):
    name: str
    codec: Codec[Any]
    required: bool


# key -> field, per config class; computed once (the classes never change).
_SPECS: dict[type, Mapping[str, _Spec]] = {}


def _specs(cls: type[Any]) -> Mapping[str, _Spec]:
    found = _SPECS.get(cls)
    if found is None:
        found = _SPECS[cls] = {
            f.metadata[_KEY]: _Spec(f.name, f.metadata[_CODEC], f.metadata.get(_REQUIRED, False))
            for f in dataclasses.fields(cls)
            if _KEY in f.metadata
        }
    return found


def unknown_field(key: str, known: Collection[str]) -> str:
    """The message for a key nobody declared, with a suggestion when one is close."""
    close = difflib.get_close_matches(key, list(known), n=1)
    if close:
        return f'unknown field (did you mean "{close[0]}"?)'
    return f"unknown field; known fields: {', '.join(known)}"


def decode_value(codec: Codec[T], raw: object, path: FieldPath, errors: Errors) -> T | None:
    """`codec.decode`, its problems added to `errors`; None when there were any."""
    before = len(errors)
    try:
        value = codec.decode(raw, path, errors)
    except Invalid as err:
        errors.add(path, err.message)
    except Reported:
        pass
    else:
        if len(errors) == before or getattr(codec, "partial", False):
            return value
    return None


def decode_fields(
    cls: type[Any],
    raw: object,
    path: FieldPath,
    errors: Errors,
    *,
    handled: Collection[str] = (),
    ignore_unknown: bool = False,
) -> tuple[dict[str, Any], frozenset[str]]:
    """The fields `raw` sets, by attribute name, and the keys that failed; see `decode_object`.

    `ignore_unknown` skips undeclared keys silently, as Go's `json.Unmarshal` does,
    for objects other programs write (a NodeMetric) or keys read elsewhere.

    For a struct merged over a base: `dataclasses.replace(base, **changes)`.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise Invalid(f"must be a mapping, not {describe(raw)}")
    specs = _specs(cls)
    values: dict[str, Any] = {}
    failed: set[str] = set()
    for key, item in raw.items():
        if not isinstance(key, str):
            errors.add(path, f"field names must be strings, got {key!r}")
            continue
        if key in handled:
            continue
        found = specs.get(key)
        if found is None:
            if not ignore_unknown:
                errors.add(path.child(key), unknown_field(key, [*handled, *specs]))
        elif item is not None:
            value = decode_value(found.codec, item, path.child(key), errors)
            if value is None:
                failed.add(key)
            else:
                values[found.name] = value
    for key, found in specs.items():
        if found.required and raw.get(key) is None:
            errors.add(path.child(key), f"required; set {key}")
            failed.add(key)
    return values, frozenset(failed)


def decode_object(
    cls: type[T],
    raw: object,
    path: FieldPath,
    errors: Errors,
    *,
    handled: Collection[str] = (),
    ignore_unknown: bool = False,
) -> T:
    """Build `cls` from the mapping `raw`; keys in `handled` are left to the caller.

    A null counts as "not set", as it does for Go's pointer fields.
    """
    values, failed = decode_fields(
        cls, raw, path, errors, handled=handled, ignore_unknown=ignore_unknown
    )
    obj = cls(**values)
    check: Callable[[FieldPath, Errors, frozenset[str]], None] | None = getattr(obj, "check", None)
    if check is not None:
        check(path, errors, failed)
    return obj


def encode_object(obj: object) -> dict[str, object]:
    """The mapping for a config object; unset (None) fields are left out."""
    out: dict[str, object] = {}
    for key, found in _specs(type(obj)).items():
        value = getattr(obj, found.name)
        if value is not None:
            out[key] = found.codec.encode(value)
    return out


class Nested(Codec[T]):
    """A field holding another config dataclass; `partial` keeps its good fields (`decode_partial`)."""

    __slots__ = ("cls", "partial")

    def __init__(self, cls: type[T], *, partial: bool = False) -> None:
        self.cls = cls
        self.partial = partial

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> T:
        if self.partial:
            return self.cls(**decode_fields(self.cls, raw, path, errors)[0])
        return decode_object(self.cls, raw, path, errors)

    def encode(self, value: T) -> object:
        return encode_object(value)


def decode_partial(cls: type[T], raw: object, path: FieldPath, errors: Errors) -> T:
    """Go's `json.Unmarshal` into pointer fields: every problem reported, the field at fault
    left unset (None), every good field kept, nested `partial` structs likewise; never raises."""
    try:
        return cls(**decode_fields(cls, raw, path, errors)[0])
    except Invalid as err:
        errors.add(path, err.message)
        return cls()


def merge(base: T, override: T) -> T:
    """`override` over `base`, as Go's `json.Unmarshal` of the override onto the base: set
    (non-None) fields win, nested structs and JSON objects merge key by key, lists replace."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(override):  # type: ignore[arg-type]
        new, old = getattr(override, f.name), getattr(base, f.name)
        if new is None:
            continue
        if old is not None and isinstance(f.metadata.get(_CODEC), Nested):
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
