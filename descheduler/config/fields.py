"""`PluginArgs`: the descheduler plugin-args envelope (`apiVersion`, `kind`) over `kube.configstruct`.

The field specs, `decode_object` and `encode_object` live in `kube.configstruct`;
they are re-exported here because out-of-tree plugins (examples/, docs/plugins.md)
write `fields.spec(...)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Self

from kube.configstruct import (
    ROOT,
    Errors,
    FieldPath,
    Nested,
    decode_object,
    describe,
    encode_object,
    spec,
    unknown_field,
)

__all__ = [
    "API_VERSION",
    "ROOT",
    "Nested",
    "PluginArgs",
    "decode_object",
    "encode_object",
    "spec",
    "unknown_field",
]

API_VERSION = "descheduler/v1alpha2"


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
    def narrow(cls, args: PluginArgs, plugin: str) -> Self:
        """`args` as this class: what a plugin's `factory` is handed. Another plugin's
        args there is a programming error of the framework's: TypeError."""
        if not isinstance(args, cls):
            raise TypeError(f"{plugin} needs {cls.__name__}, not {type(args).__name__}")
        return args

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
        return cls.decode_mapping(raw, path, errors)

    @classmethod
    def decode_mapping(
        cls, raw: Mapping[str, object], path: FieldPath, errors: Errors
    ) -> Self | None:
        """`decode` of a mapping (a null is an empty one); a subclass may take it over."""
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
