"""Declarative config objects: YAML field specs on dataclass fields, one decoder for all.

A config dataclass names each field's YAML key and codec in the field's
metadata, next to its default::

    @dataclass(frozen=True, kw_only=True, slots=True)
    class AnomalyCondition:
        timeout: timedelta = field(default=timedelta(minutes=1), metadata=fields.spec("timeout", codecs.DURATION))

A field without `spec` metadata is not read from YAML.

`decode_object` turns a YAML mapping into such an object: it rejects unknown keys,
reports every bad field (keeping the field default so decoding can go on), and
then runs the object's own `check(path, errors, failed)` for rules that span
fields, telling it which keys failed so it does not judge stand-in defaults.
`encode_object` writes the object back. `PluginArgs` adds the plugin-args
envelope (`apiVersion`, `kind`) and the public `from_mapping` / `to_mapping`.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Collection, Mapping
from typing import Any, ClassVar, NamedTuple, Self, TypeVar

from descheduler.config.codecs import Codec, describe
from descheduler.config.errors import Errors, FieldPath, Invalid, Reported

T = TypeVar("T")

API_VERSION = "descheduler/v1alpha2"
ROOT = FieldPath()

_KEY = "yaml_key"
_CODEC = "yaml_codec"


def spec(key: str, codec: Codec[Any]) -> dict[str, object]:
    """Field metadata: read this field from YAML key `key` with `codec`."""
    return {_KEY: key, _CODEC: codec}


class _Spec(NamedTuple):
    name: str
    codec: Codec[Any]


# YAML key -> field, per config class; computed once (the classes never change).
_SPECS: dict[type, Mapping[str, _Spec]] = {}


def _specs(cls: type[Any]) -> Mapping[str, _Spec]:
    found = _SPECS.get(cls)
    if found is None:
        found = _SPECS[cls] = {
            field.metadata[_KEY]: _Spec(field.name, field.metadata[_CODEC])
            for field in dataclasses.fields(cls)
            if _KEY in field.metadata
        }
    return found


def unknown_field(key: str, known: Collection[str]) -> str:
    """The message for a key nobody declared, with a suggestion when one is close."""
    close = difflib.get_close_matches(key, list(known), n=1)
    if close:
        return f'unknown field (did you mean "{close[0]}"?)'
    return f"unknown field; known fields: {', '.join(known)}"


def decode_object(
    cls: type[T],
    raw: object,
    path: FieldPath,
    errors: Errors,
    *,
    handled: Collection[str] = (),
) -> T:
    """Build `cls` from the mapping `raw`; keys in `handled` are left to the caller.

    A YAML null counts as "not set", as it does for Go's pointer fields.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise Invalid(f"must be a mapping, not {describe(raw)}")
    specs = _specs(cls)
    values: dict[str, object] = {}
    failed: set[str] = set()
    for key, item in raw.items():
        if not isinstance(key, str):
            errors.add(path, f"field names must be strings, got {key!r}")
            continue
        if key in handled:
            continue
        spec = specs.get(key)
        if spec is None:
            errors.add(path.child(key), unknown_field(key, [*handled, *specs]))
            continue
        if item is None:
            continue
        field_path = path.child(key)
        before = len(errors)
        try:
            value = spec.codec.decode(item, field_path, errors)
        except Invalid as err:
            errors.add(field_path, err.message)
        except Reported:
            pass
        else:
            if len(errors) == before:
                values[spec.name] = value
                continue
        failed.add(key)
    obj = cls(**values)
    check: Callable[[FieldPath, Errors, frozenset[str]], None] | None = getattr(obj, "check", None)
    if check is not None:
        check(path, errors, frozenset(failed))
    return obj


def encode_object(obj: object) -> dict[str, object]:
    """The YAML mapping for a config object; unset (None) fields are left out."""
    out: dict[str, object] = {}
    for key, spec in _specs(type(obj)).items():
        value = getattr(obj, spec.name)
        if value is not None:
            out[key] = spec.codec.encode(value)
    return out


class Nested(Codec[T]):
    """A field holding another config dataclass."""

    __slots__ = ("cls",)

    def __init__(self, cls: type[T]) -> None:
        self.cls = cls

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> T:
        return decode_object(self.cls, raw, path, errors)

    def encode(self, value: T) -> object:
        return encode_object(value)


class PluginArgs:
    """Base of every plugin's Args dataclass.

    Subclasses are `@dataclass(frozen=True, kw_only=True, slots=True)` with their
    fields' YAML keys in `spec` metadata, set `KIND` to the wire kind
    (`LowNodeLoadArgs`), and may define `check(path, errors, failed)` for rules
    spanning fields and `complete(raw, path, errors)` for defaults that depend on
    other fields.
    """

    __slots__ = ()
    KIND: ClassVar[str]

    @classmethod
    def from_mapping(cls, raw: object, path: FieldPath = ROOT) -> Self:
        """Decode and validate; raises ConfigError listing every problem."""
        errors = Errors()
        args = cls.decode(raw, path, errors)
        errors.raise_if_any()
        assert args is not None  # no errors means decoding produced an object
        return args

    @classmethod
    def decode(cls, raw: object, path: FieldPath, errors: Errors) -> Self | None:
        """Like `from_mapping`, but adds problems to `errors` (None when unusable)."""
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            errors.add(path, f"must be a mapping, not {describe(raw)}")
            return None
        api_version = raw.get("apiVersion")
        if api_version is not None and api_version != API_VERSION:
            errors.add(path.child("apiVersion"), f'must be "{API_VERSION}" (got {api_version!r})')
        kind = raw.get("kind")
        if kind is not None and kind != cls.KIND:
            errors.add(path.child("kind"), f'must be "{cls.KIND}" (got {kind!r})')
        before = len(errors)
        args = decode_object(cls, raw, path, errors, handled=("apiVersion", "kind"))
        if len(errors) > before:
            return None
        return args.complete(raw, path, errors)

    def complete(self, raw: Mapping[str, object], path: FieldPath, errors: Errors) -> Self:
        """Fill defaults that depend on other fields; the base has none."""
        return self

    def to_mapping(self) -> dict[str, object]:
        """The args as YAML, with `apiVersion` and `kind`, every default written out."""
        return {"apiVersion": API_VERSION, "kind": self.KIND, **encode_object(self)}
