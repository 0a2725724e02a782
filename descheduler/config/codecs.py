"""Codecs: how one YAML value becomes one typed value, and back.

A codec's `decode` either returns the typed value, raises `Invalid` for a single
problem at the path it was given, or records several problems itself (lists,
maps, nested objects) and raises `Reported`. `encode` writes the value in the form
`decode` reads, so a written configuration loads into an equal object.

YAML scalars are taken at their YAML type, as Go's strict decoding does: `"20"` is
not a number and `20` is not a duration.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Generic, TypeVar

from descheduler.config import durations
from descheduler.config.errors import Errors, FieldPath, Invalid, Reported

T = TypeVar("T")
E = TypeVar("E", bound=enum.Enum)


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


def frozen_map(items: Mapping[str, T]) -> Mapping[str, T]:
    """A read-only copy, so frozen config objects stay frozen."""
    return MappingProxyType(dict(items))


class Codec(Generic[T]):
    """Reads one YAML value into a `T` and writes it back."""

    __slots__ = ()

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> T:
        raise NotImplementedError

    def encode(self, value: T) -> object:
        raise NotImplementedError


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
    minimum: int | None = None

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> int:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise Invalid(f"must be an integer, not {describe(raw)}")
        if self.minimum is not None and raw < self.minimum:
            raise Invalid(f"must be >= {self.minimum}")
        return raw

    def encode(self, value: int) -> object:
        return value


def _plain(number: float) -> int | float:
    """45.0 is written as 45: it reads back as the same float."""
    return int(number) if float(number).is_integer() else number


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
        low, high = self.minimum, self.maximum
        if low is not None and high is not None and not low <= value <= high:
            raise Invalid(f"must be within [{_plain(low)}, {_plain(high)}]")
        if low is not None and value < low:
            raise Invalid(f"must be >= {_plain(low)}")
        if high is not None and value > high:
            raise Invalid(f"must be <= {_plain(high)}")
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
    """A Go duration string; `positive` rejects zero, negatives are always rejected."""

    positive: bool = False

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> timedelta:
        if not isinstance(raw, str):
            raise Invalid(
                f'must be a duration string such as "90s", "5m" or "1h30m", not {describe(raw)}'
            )
        try:
            value = durations.parse(raw)
        except ValueError as err:
            raise Invalid(f'{err} (use Go syntax such as "90s", "5m" or "1h30m")') from None
        if value < timedelta(0):
            raise Invalid("must not be negative")
        if self.positive and value == timedelta(0):
            raise Invalid("must be greater than zero")
        return value

    def encode(self, value: timedelta) -> object:
        return durations.render(value)


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
            raise Invalid(f"must be one of: {', '.join(self.allowed)}")
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
