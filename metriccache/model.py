"""Value types of the metric cache: samples, label keys, per-kind state, stats.

`Sample`, `CacheStats` and the type aliases are public (re-exported by the
package); `KindState` is internal to `metriccache.cache` and
`metriccache.recovery`.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeAlias, cast

from metriccache.errors import SchemaError
from metriccache.kinds import MetricKind
from metriccache.series import Series

Clock: TypeAlias = Callable[[], float]
# A series' label values in the order of its kind's `labels`, e.g. ("<uid>",).
LabelKey: TypeAlias = tuple[str, ...]
JSONValue: TypeAlias = bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"] | None


@dataclass(frozen=True, slots=True)
class Sample:
    """One measurement: a kind, exactly that kind's labels, a time (s) and a value."""

    kind: MetricKind
    labels: Mapping[str, str]
    timestamp: float
    value: float


@dataclass(frozen=True, slots=True)
class CacheStats:
    """Counters for the agent's /metrics (read through `MetricCache.stats`)."""

    series: int
    samples: int
    pending_samples: int
    dropped_samples: int
    flush_errors: int
    last_flush_time: float | None


def _key_function(labels: tuple[str, ...]) -> Callable[[Mapping[str, str]], LabelKey]:
    """A fast C-level getter of the label values (KeyError when one is missing)."""
    if not labels:
        return lambda _labels: ()
    if len(labels) == 1:
        (name,) = labels
        return lambda mapping: (mapping[name],)
    return cast(Callable[[Mapping[str, str]], LabelKey], operator.itemgetter(*labels))


class KindState:
    """A registered kind, its label-key function and its series by label values."""

    __slots__ = ("capacity", "key_of", "kind", "n_labels", "table")

    def __init__(self, kind: MetricKind, max_rate_hz: float) -> None:
        self.kind = kind
        self.n_labels = len(kind.labels)
        self.key_of = _key_function(kind.labels)
        self.capacity = max(1, math.ceil(kind.retention_seconds * max_rate_hz))
        self.table: dict[LabelKey, Series] = {}

    def accepts(self, kind: MetricKind) -> None:
        """Raise `SchemaError` unless `kind` has this kind's label schema."""
        if kind.labels != self.kind.labels:
            raise SchemaError(
                f"metric kind {kind.name!r} is registered with labels {list(self.kind.labels)},"
                f" not {list(kind.labels)}"
            )

    def exact_key(self, labels: Mapping[str, str]) -> LabelKey:
        """The key of the series `labels` names; `SchemaError` unless they are exact."""
        if len(labels) == self.n_labels:
            try:
                return self.key_of(labels)
            except KeyError:
                pass
        raise SchemaError(
            f"metric kind {self.kind.name!r} takes exactly the labels {list(self.kind.labels)},"
            f" got {sorted(labels)}"
        )

    def matcher(self, labels: Mapping[str, str]) -> list[tuple[int, str]]:
        """(key index, value) pairs a key must match to carry `labels`."""
        unknown = sorted(set(labels) - set(self.kind.labels))
        if unknown:
            raise SchemaError(
                f"metric kind {self.kind.name!r} has no label {', '.join(unknown)};"
                f" its labels are {list(self.kind.labels)}"
            )
        return [(self.kind.labels.index(name), value) for name, value in labels.items()]

    def labels_of(self, series: Series) -> dict[str, str]:
        """The label mapping of one of this kind's series."""
        return dict(zip(self.kind.labels, series.key, strict=True))
