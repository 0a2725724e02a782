"""Decaying histograms: the peak predictor's memory of a usage distribution.

The agent's peak predictor (`agent.predictor`) keeps one CPU and one memory
histogram per Prod pod and per node item (the system part, the Prod class);
the histograms are stored in this package's key/value half as checkpoints
(`to_checkpoint` / `from_checkpoint`) so an agent restart keeps their history.
Pure: no I/O, no clock; times are seconds since the epoch, passed in.

The model is Koordinator's (`pkg/util/histogram`, itself the Vertical Pod
Autoscaler's): buckets of exponentially growing size; a sample adds its weight
to one bucket; `percentile(p)` is the *end* of the first bucket whose running
weight reaches p of the total (no interpolation); a bucket lighter than
`epsilon` counts as empty. A decaying histogram multiplies a sample's weight by
2^((t - reference) / half_life), so a sample loses half its importance every
half-life relative to newer ones; the reference time is a multiple of the
half-life and moves forward (rescaling every weight) before the factor
exceeds 2^100.

A checkpoint keeps each bucket's weight scaled so the heaviest is 10,000 and
rounded (buckets rounding to 0 are dropped), the total weight and the
reference time, as Koordinator's `HistogramCheckpoint` does, plus a format
version and the bucket layout: a checkpoint of another version or layout is
refused (`CheckpointError`), never half-read.

This package imports nothing else of nodeqos.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CHECKPOINT_VERSION",
    "MAX_CHECKPOINT_WEIGHT",
    "Buckets",
    "CheckpointError",
    "DecayingHistogram",
    "Histogram",
    "exponential_buckets",
    "linear_buckets",
]

CHECKPOINT_VERSION = 1
MAX_CHECKPOINT_WEIGHT = 10_000  # Koordinator's MaxCheckpointWeight
_MAX_DECAY_EXPONENT = 100  # renormalise before 2^100 (Koordinator's maxDecayExponent)


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded: corrupt, another version or another layout."""


@dataclass(frozen=True, slots=True)
class Buckets:
    """A bucket layout: `count` buckets, the first `[0, first)`, each `ratio` times the last.

    `ratio` 1 is the linear layout (every bucket `first` wide). Build one with
    `exponential_buckets` or `linear_buckets`.
    """

    count: int
    first: float
    ratio: float
    epsilon: float

    @property
    def key(self) -> str:
        """The layout's identity in a checkpoint."""
        return f"{self.count}:{self.first!r}:{self.ratio!r}:{self.epsilon!r}"

    def find(self, value: float) -> int:
        """The bucket `value` falls in; out-of-range values go to the first or last."""
        if value < self.first:
            return 0
        if self.ratio == 1.0:
            bucket = int(value / self.first)
        else:
            bucket = int(math.log(value * (self.ratio - 1) / self.first + 1) / math.log(self.ratio))
        return min(bucket, self.count - 1)

    def start(self, bucket: int) -> float:
        """Where `bucket` starts (`IndexError` outside the layout)."""
        if not 0 <= bucket < self.count:
            raise IndexError(f"bucket {bucket} out of range [0..{self.count - 1}]")
        if self.ratio == 1.0:
            return bucket * self.first
        if bucket == 0:
            return 0.0
        return self.first * (self.ratio**bucket - 1) / (self.ratio - 1)


def exponential_buckets(max_value: float, first: float, ratio: float, epsilon: float) -> Buckets:
    """Buckets from `[0, first)` growing by `ratio`, the last starting at or above `max_value`."""
    if not (max_value > 0 and first > 0 and ratio > 1 and epsilon > 0):
        raise ValueError("max_value, first and epsilon must be > 0, ratio > 1")
    count = math.ceil(math.log(max_value * (ratio - 1) / first + 1) / math.log(ratio)) + 1
    return Buckets(count, first, ratio, epsilon)


def linear_buckets(max_value: float, size: float, epsilon: float) -> Buckets:
    """Buckets `size` wide from 0, the last starting at or above `max_value`."""
    if not (max_value > 0 and size > 0 and epsilon > 0):
        raise ValueError("max_value, size and epsilon must be > 0")
    return Buckets(math.ceil(max_value / size) + 1, size, 1.0, epsilon)


class Histogram:
    """Weights of samples per bucket; see the module docstring.

    Only the span of buckets ever touched is stored (an `array` of doubles
    from the lowest to the highest), not the whole layout: a pod's usage
    covers a few dozen of the CPU layout's 158 buckets, and the agent keeps
    two histograms per Prod pod within its memory budget.
    """

    __slots__ = ("_lo", "_max", "_min", "_w", "buckets", "total")

    def __init__(self, buckets: Buckets) -> None:
        self.buckets = buckets
        self._lo = 0  # the bucket _w[0] holds
        self._w = array("d")
        self.total = 0.0
        self._min = buckets.count - 1  # first non-empty bucket, else the last
        self._max = 0  # last non-empty bucket, else 0

    def weight(self, bucket: int) -> float:
        """The weight in `bucket`."""
        i = bucket - self._lo
        return self._w[i] if 0 <= i < len(self._w) else 0.0

    def _slot(self, bucket: int) -> int:
        """The index of `bucket` in the stored span, widening it as needed."""
        if not self._w:
            self._lo = bucket
            self._w.append(0.0)
        elif bucket < self._lo:
            self._w[0:0] = array("d", bytes(8 * (self._lo - bucket)))
            self._lo = bucket
        elif bucket >= self._lo + len(self._w):
            self._w.extend(array("d", bytes(8 * (bucket - self._lo - len(self._w) + 1))))
        return bucket - self._lo

    def add(self, value: float, weight: float) -> None:
        """Add a sample of `value` with `weight` (>= 0)."""
        if weight < 0:
            raise ValueError("sample weight must be non-negative")
        bucket = self.buckets.find(value)
        i = self._slot(bucket)
        self._w[i] += weight
        self.total += weight
        if self._w[i] >= self.buckets.epsilon:
            self._min = min(self._min, bucket)
            self._max = max(self._max, bucket)

    def subtract(self, value: float, weight: float) -> None:
        """Remove weight from a sample's bucket; weights below epsilon read as 0."""
        if weight < 0:
            raise ValueError("sample weight must be non-negative")
        bucket = self.buckets.find(value)
        eps = self.buckets.epsilon
        self.total = _floored(self.total - weight, eps)
        i = self._slot(bucket)
        self._w[i] = _floored(self._w[i] - weight, eps)
        self._fix_range()

    def is_empty(self) -> bool:
        """Whether no bucket holds at least epsilon."""
        return self.weight(self._min) < self.buckets.epsilon

    def percentile(self, p: float) -> float:
        """The end of the bucket holding the p-th fraction of the weight (0 when empty)."""
        if self.is_empty():
            return 0.0
        threshold = p * self.total
        partial = 0.0
        bucket = self._min
        while bucket < self._max:
            partial += self.weight(bucket)
            if partial >= threshold:
                break
            bucket += 1
        if bucket < self.buckets.count - 1:
            return self.buckets.start(bucket + 1)
        return self.buckets.start(bucket)  # the last bucket has no end

    def scale(self, factor: float) -> None:
        """Multiply every weight by `factor` (>= 0); percentiles do not change."""
        if factor < 0:
            raise ValueError("scale factor must be non-negative")
        for i in range(len(self._w)):
            self._w[i] *= factor
        self.total *= factor
        self._fix_range()

    def _fix_range(self) -> None:
        eps, last = self.buckets.epsilon, self.buckets.count - 1
        while self.weight(self._min) < eps and self._min < last:
            self._min += 1
        while self.weight(self._max) < eps and self._max > 0:
            self._max -= 1

    def checkpoint_weights(self) -> dict[int, int]:
        """Bucket -> weight scaled so the heaviest is `MAX_CHECKPOINT_WEIGHT`, zeros dropped."""
        span = range(self._min, self._max + 1)
        heaviest = max((self.weight(b) for b in span), default=0.0)
        if heaviest <= 0:
            return {}
        ratio = MAX_CHECKPOINT_WEIGHT / heaviest
        out = {}
        for bucket in span:
            weight = math.floor(self.weight(bucket) * ratio + 0.5)
            if weight > 0:
                out[bucket] = weight
        return out

    def load_weights(self, weights: Mapping[int, int], total: float) -> None:
        """Add a checkpoint's buckets, rescaled to `total` (`CheckpointError` if invalid)."""
        if not (isinstance(total, int | float) and math.isfinite(total) and total >= 0):
            raise CheckpointError(f"total weight {total!r} is not a non-negative number")
        for bucket, weight in weights.items():
            if not 0 <= bucket < self.buckets.count:
                raise CheckpointError(
                    f"bucket {bucket} outside the histogram's {self.buckets.count}"
                )
            if isinstance(weight, bool) or not isinstance(weight, int) or weight < 0:
                raise CheckpointError(f"bucket {bucket}: weight {weight!r} is not a count")
        count = sum(weights.values())
        if count == 0:
            return
        ratio = total / count
        for bucket, weight in sorted(weights.items()):
            self._w[self._slot(bucket)] += weight * ratio
            self._min = min(self._min, bucket)
            self._max = max(self._max, bucket)
        self.total += total


def _floored(value: float, epsilon: float) -> float:
    return 0.0 if value < epsilon else value


class DecayingHistogram:
    """A `Histogram` whose samples lose half their weight every `half_life` seconds."""

    __slots__ = ("half_life", "histogram", "reference")

    def __init__(self, buckets: Buckets, half_life: float) -> None:
        if not half_life > 0:
            raise ValueError("half_life must be > 0")
        self.histogram = Histogram(buckets)
        self.half_life = half_life
        # None until the first sample: then a multiple of half_life near it.
        self.reference: float | None = None

    def add(self, value: float, weight: float, t: float) -> None:
        """Add a sample of `value` taken at `t` (seconds) with `weight` before decay."""
        self.histogram.add(value, weight * self._factor(t))

    def subtract(self, value: float, weight: float, t: float) -> None:
        """Remove a sample added at `t`."""
        self.histogram.subtract(value, weight * self._factor(t))

    def percentile(self, p: float) -> float:
        """See `Histogram.percentile`."""
        return self.histogram.percentile(p)

    def is_empty(self) -> bool:
        """Whether the histogram holds no weight."""
        return self.histogram.is_empty()

    def _factor(self, t: float) -> float:
        if self.reference is None or t > self.reference + self.half_life * _MAX_DECAY_EXPONENT:
            self._shift_reference(t)
        assert self.reference is not None
        return math.exp2((t - self.reference) / self.half_life)

    def _shift_reference(self, t: float) -> None:
        new = round(t / self.half_life) * self.half_life
        if self.reference is not None:
            exponent = round((self.reference - new) / self.half_life)
            self.histogram.scale(math.ldexp(1.0, exponent))
        self.reference = new

    def to_checkpoint(self) -> dict[str, Any]:
        """A JSON-ready checkpoint (version, layout, half-life, reference, total, buckets)."""
        h = self.histogram
        return {
            "version": CHECKPOINT_VERSION,
            "layout": h.buckets.key,
            "halfLife": self.half_life,
            "reference": self.reference,
            "total": h.total,
            "buckets": {str(b): w for b, w in h.checkpoint_weights().items()},
        }

    @classmethod
    def from_checkpoint(cls, raw: object, buckets: Buckets, half_life: float) -> DecayingHistogram:
        """The histogram `raw` holds; `CheckpointError` when it is not one of this layout."""
        if not isinstance(raw, Mapping):
            raise CheckpointError(f"not a checkpoint object: {type(raw).__name__}")
        if raw.get("version") != CHECKPOINT_VERSION:
            raise CheckpointError(
                f"checkpoint version {raw.get('version')!r}, this agent reads {CHECKPOINT_VERSION}"
            )
        if raw.get("layout") != buckets.key or raw.get("halfLife") != half_life:
            raise CheckpointError("checkpoint of another bucket layout or half-life")
        reference = raw.get("reference")
        if reference is not None and not (
            isinstance(reference, int | float) and math.isfinite(reference)
        ):
            raise CheckpointError(f"reference time {reference!r} is not a number")
        found = raw.get("buckets")
        if not isinstance(found, Mapping):
            raise CheckpointError("checkpoint without buckets")
        try:
            weights = {int(b): w for b, w in found.items()}
        except (TypeError, ValueError) as err:
            raise CheckpointError(f"bucket index is not an integer: {err}") from None
        hist = cls(buckets, half_life)
        hist.histogram.load_weights(weights, raw.get("total"))  # type: ignore[arg-type]
        hist.reference = None if reference is None else float(reference)
        return hist
