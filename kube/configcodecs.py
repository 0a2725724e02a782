"""Codecs of `kube.configstruct`: how one YAML/JSON value becomes one typed value, and back.

Scalars (bool, int, number, string, enum choice, Go duration, Kubernetes
quantity), list-of, map-of and nested structs (`configstruct.Nested`). YAML
scalars are taken at their YAML type, as Go's strict decoding does: `"20"` is not
a number and `20` is not a duration. Imports nothing of nodeqos outside `kube`.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import TypeVar

from kube import quantity
from kube.configstruct import Codec, Errors, FieldPath, Invalid, Reported, describe

__all__ = [
    "BOOL",
    "DURATION",
    "INTEGER",
    "JSON",
    "JSON_LIST",
    "NAME",
    "NON_NEGATIVE",
    "NUMBER",
    "PERCENT",
    "POSITIVE",
    "POSITIVE_DURATION",
    "QUANTITY",
    "STRING",
    "STRINGS",
    "Boolean",
    "Choice",
    "Duration",
    "Integer",
    "KeyChoice",
    "ListOf",
    "MapOf",
    "Number",
    "NumberOrNumericString",
    "Opaque",
    "Quantity",
    "String",
    "frozen_map",
    "render_duration",
]

T = TypeVar("T")
E = TypeVar("E", bound=enum.Enum)


def frozen_map(items: Mapping[str, T]) -> Mapping[str, T]:
    """A read-only copy, so frozen config objects stay frozen."""
    return MappingProxyType(dict(items))


@dataclass(frozen=True, slots=True)
class Boolean(Codec[bool]):
    def decode(self, raw: object, path: FieldPath, errors: Errors) -> bool:
        if not isinstance(raw, bool):
            raise Invalid(f"must be true or false, not {describe(raw)}")
        return raw

    def encode(self, value: bool) -> object:
        return value


@dataclass(frozen=True, slots=True)
class Integer(Codec[int]):
    """An integer; `whole_floats` also takes a JSON number written 60.0 (as 60)."""

    minimum: int | None = None
    maximum: int | None = None
    whole_floats: bool = False

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> int:
        if self.whole_floats and isinstance(raw, float) and raw.is_integer():
            raw = int(raw)
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise Invalid(
                f"must be an integer, not {raw if isinstance(raw, float) else describe(raw)}"
            )
        _check_bounds(raw, self.minimum, self.maximum, got=f" (got {raw})")
        return raw

    def encode(self, value: int) -> object:
        return value


def _plain(number: float) -> int | float:
    """45.0 is written as 45: it reads back as the same float."""
    return int(number) if float(number).is_integer() else number


def _check_bounds(value: float, low: float | None, high: float | None, *, got: str = "") -> None:
    """Raise Invalid when `value` is outside [low, high] (a bound of None is open); `got`
    ends the message for a value outside both bounds."""
    if low is not None and high is not None and not low <= value <= high:
        raise Invalid(f"must be within [{_plain(low)}, {_plain(high)}]{got}")
    if low is not None and value < low:
        raise Invalid(f"must be >= {_plain(low)}")
    if high is not None and value > high:
        raise Invalid(f"must be <= {_plain(high)}")


@dataclass(frozen=True, slots=True)
class Number(Codec[float]):
    """An int or float YAML value; `above` excludes its bound, `minimum` includes it."""

    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> float:
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise Invalid(f"must be a number, not {describe(raw)}")
        return self.check(float(raw))

    def check(self, value: float) -> float:
        _check_bounds(value, self.minimum, self.maximum)
        if self.above is not None and value <= self.above:
            raise Invalid(f"must be > {_plain(self.above)}")
        return value

    def encode(self, value: float) -> object:
        return _plain(value)


@dataclass(frozen=True, slots=True)
class NumberOrNumericString(Codec[float]):
    """Koordinator's Float64OrString (`evictQPS: "10"` or `evictQPS: 10`)."""

    number: Number = field(default_factory=Number)

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> float:
        if isinstance(raw, str):
            try:
                value = float(raw)
            except ValueError:
                raise Invalid(f"must be a number or a numeric string, not {raw!r}") from None
            return self.number.check(value)
        return self.number.decode(raw, path, errors)

    def encode(self, value: float) -> object:
        return _plain(value)


@dataclass(frozen=True, slots=True)
class String(Codec[str]):
    required: bool = False

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> str:
        if not isinstance(raw, str):
            raise Invalid(f"must be a string, not {describe(raw)}")
        if self.required and not raw:
            raise Invalid("must not be empty")
        return raw

    def encode(self, value: str) -> object:
        return value


@dataclass(frozen=True, slots=True)
class Choice(Codec[E]):
    """A string naming one member of a string-valued enum; `aliases` maps extra spellings."""

    enum_type: type[E]
    aliases: Mapping[str, E] = field(default_factory=lambda: MappingProxyType({}))

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> E:
        if isinstance(raw, str):
            if raw in self.aliases:
                return self.aliases[raw]
            for member in self.enum_type:
                if member.value == raw:
                    return member
        allowed = ", ".join(str(member.value) for member in self.enum_type)
        raise Invalid(f"must be one of: {allowed} (got {raw!r})")

    def encode(self, value: E) -> object:
        return value.value


@dataclass(frozen=True, slots=True)
class Duration(Codec[timedelta]):
    """A Go duration string; `positive` rejects zero, negatives are rejected unless `signed`."""

    positive: bool = False
    signed: bool = False

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> timedelta:
        if not isinstance(raw, str):
            raise Invalid(
                f'must be a duration string such as "90s", "5m" or "1h30m", not {describe(raw)}'
            )
        try:
            value = quantity.parse_go_duration(raw)
        except ValueError as err:
            raise Invalid(f'{err} (use Go syntax such as "90s", "5m" or "1h30m")') from None
        if value < timedelta(0) and not self.signed:
            raise Invalid("must not be negative")
        if self.positive and value == timedelta(0):
            raise Invalid("must be greater than zero")
        return value

    def encode(self, value: timedelta) -> object:
        return render_duration(value)


@dataclass(frozen=True, slots=True)
class Quantity(Codec[str | int | float]):
    """A Kubernetes quantity (`"500m"`, `"2Gi"`, `4`), kept as written."""

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> str | int | float:
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            raise Invalid(f'must be a quantity such as "500m" or "2Gi", not {describe(raw)}')
        try:
            quantity.parse_quantity(raw)
        except ValueError:
            raise Invalid(f'invalid quantity {raw!r} (write it like "500m" or "2Gi")') from None
        return raw

    def encode(self, value: str | int | float) -> object:
        return value


@dataclass(frozen=True, slots=True)
class Opaque(Codec[object]):
    """JSON kept as is (an object, or a list with `list_`), deep-copied in and out."""

    list_: bool = False

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> object:
        if not isinstance(raw, list if self.list_ else Mapping):
            raise Invalid(f"must be {'a list' if self.list_ else 'a mapping'}, not {describe(raw)}")
        return copy.deepcopy(raw)

    def encode(self, value: object) -> object:
        return copy.deepcopy(list(value) if self.list_ else dict(value))  # type: ignore[call-overload]


def _decimal(value: int, unit: int) -> str:
    """`value / unit` written without trailing zeros: 1500, 1000 -> "1.5"."""
    whole, rest = divmod(value, unit)
    if not rest:
        return str(whole)
    return f"{whole}.{rest:0{len(str(unit)) - 1}d}".rstrip("0")


def render_duration(value: timedelta) -> str:
    """A duration as Go's `Duration.String` writes it ("1h30m0s", "500ms"; "us" for µs)."""
    micros = abs(value // timedelta(microseconds=1))
    sign = "-" if value < timedelta(0) else ""
    if micros < 1_000:
        return f"{sign}{micros}us" if micros else "0s"
    if micros < 1_000_000:
        return f"{sign}{_decimal(micros, 1_000)}ms"
    hours, rest = divmod(micros, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    text = sign + (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "")
    return f"{text}{_decimal(rest, 1_000_000)}s"


@dataclass(frozen=True, slots=True)
class ListOf(Codec[tuple[T, ...]]):
    """A YAML list; every bad element is reported, then the whole list is dropped."""

    item: Codec[T]

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> tuple[T, ...]:
        if not isinstance(raw, list):
            raise Invalid(f"must be a list, not {describe(raw)}")
        before = len(errors)
        items: list[T] = []
        for position, element in enumerate(raw):
            element_path = path.index(position)
            try:
                items.append(self.item.decode(element, element_path, errors))
            except Invalid as err:
                errors.add(element_path, err.message)
            except Reported:
                pass
        if len(errors) > before:
            raise Reported
        return tuple(items)

    def encode(self, value: tuple[T, ...]) -> object:
        return [self.item.encode(item) for item in value]


@dataclass(frozen=True, slots=True)
class MapOf(Codec[Mapping[str, T]]):
    """A YAML mapping with string keys (resource names, limiter kinds, ...)."""

    value: Codec[T]
    key: Codec[str] = field(default_factory=lambda: String(required=True))

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> Mapping[str, T]:
        if not isinstance(raw, Mapping):
            raise Invalid(f"must be a mapping, not {describe(raw)}")
        before = len(errors)
        items: dict[str, T] = {}
        for raw_key, element in raw.items():
            try:
                key = self.key.decode(raw_key, path, errors)
            except Invalid as err:
                errors.add(path, f"key {raw_key!r}: {err.message}")
                continue
            element_path = path.key(key)
            try:
                items[key] = self.value.decode(element, element_path, errors)
            except Invalid as err:
                errors.add(element_path, err.message)
            except Reported:
                pass
        if len(errors) > before:
            raise Reported
        return frozen_map(items)

    def encode(self, value: Mapping[str, T]) -> object:
        return {self.key.encode(key): self.value.encode(item) for key, item in value.items()}


@dataclass(frozen=True, slots=True)
class KeyChoice(Codec[str]):
    """A map key restricted to a fixed set of names."""

    allowed: tuple[str, ...]

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> str:
        if not isinstance(raw, str) or raw not in self.allowed:
            shown = ", ".join(name for name in self.allowed if name)  # "" (unset) goes unsaid
            raise Invalid(f"must be one of: {shown}")
        return raw

    def encode(self, value: str) -> object:
        return value


BOOL = Boolean()
STRING = String()
NAME = String(required=True)
NON_NEGATIVE = Integer(minimum=0)
POSITIVE = Integer(minimum=1)
INTEGER = Integer()
NUMBER = Number()
DURATION = Duration()
POSITIVE_DURATION = Duration(positive=True)
STRINGS = ListOf(STRING)
PERCENT = Integer(minimum=0, maximum=100)
QUANTITY = Quantity()
JSON = Opaque()
JSON_LIST = Opaque(list_=True)
