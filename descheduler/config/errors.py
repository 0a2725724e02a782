"""Field paths and configuration errors.

Every problem found while loading a configuration becomes a `FieldError` whose
path names the offending field the way a user would find it in the YAML file,
e.g. ``profiles[0].pluginConfig[LowNodeLoad].args.highThresholds.cpu``. The loader
collects all of them in an `Errors` list and raises one `ConfigError` at the end,
so a user fixes every mistake in one round instead of one per run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

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
