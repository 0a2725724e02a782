"""Kubernetes resource quantities and Go durations, exactly; the `Resources` type.

Everything in nodeqos that reads a quantity from the API (pod requests, node
allocatable, NodeMetric usages) goes through `parse_quantity` and its integer
helpers, and everything that writes one goes through the formatters here, so the
rounding matches `k8s.io/apimachinery/pkg/api/resource` bit for bit:

- the accepted grammar is the one documented on `resource.Quantity`: an optional
  sign, digits with an optional fraction, then one suffix (``n u m "" k M G T P
  E``, ``Ki Mi Gi Ti Pi Ei``, or an integer decimal exponent ``e3``/``E-3``);
- a value finer than one nano is rounded away from zero to a whole nano
  (``"0.9n"`` is ``1n``), and a binary-suffixed value is capped at 2**63-1, as
  `ParseQuantity` does;
- `MilliValue`/`Value` round away from zero (so up, for the positive values
  resources carry): `cpu_millis("0.0001")` is 1.

Go's scanner also accepts strings without any digit ("+", "m", "e3") as zero;
the documented grammar and the CRD pattern do not, and neither do we.

Durations (`metav1.Duration`, e.g. NodeMetric's aggregation windows and a
PodMigrationJob's ttl) use Go's `time.Duration` text: `format_go_duration(300)`
is "5m0s", and `parse_go_duration` reads "1h30m", "90s", "500ms".

`Resources` is the immutable resource-name → integer mapping used by the pod and
node views and the NodeMetric model: CPU in millicores, every other resource in
its base unit (bytes for memory, ephemeral-storage and hugepages; a count for
extended resources).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from datetime import timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any, Final, TypeVar, overload

__all__ = [
    "CPU",
    "EMPTY",
    "EPHEMERAL_STORAGE",
    "MEMORY",
    "PODS",
    "Resources",
    "cpu_millis",
    "format_binary_si",
    "format_bytes",
    "format_cpu",
    "format_decimal_si",
    "format_go_duration",
    "memory_bytes",
    "parse_go_duration",
    "parse_quantity",
    "quantity_value",
]

CPU: Final = "cpu"
MEMORY: Final = "memory"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"
PODS: Final = "pods"

_QUANTITY_RE = re.compile(
    r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
# n u m "" k M G T P E are 10**-9 ... 10**18 in steps of 10**3.
_DECIMAL_SUFFIXES: Final = {s: 3 * i - 9 for i, s in enumerate(["n", "u", "m", "", *"kMGTPE"])}
_BINARY_SUFFIXES: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_EXPONENT_TO_SUFFIX: Final = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_CAP: Final = 2**63 - 1
_NANO: Final = 10**9
_MAX_EXPONENT: Final = 1000


def _round_away(value: Fraction) -> int:
    """Round to an integer away from zero, like apimachinery's scaling."""
    return math.ceil(value) if value >= 0 else math.floor(value)


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> Fraction:
    match = _QUANTITY_RE.fullmatch(text)
    if match is None or not (match["int"] or match["frac"]):
        raise ValueError(f"invalid quantity {text!r}")
    digits = match["int"] + (match["frac"] or "")
    value = Fraction(int(digits or "0"), 10 ** len(match["frac"] or ""))
    suffix = match["suffix"] or ""
    binary = suffix in _BINARY_SUFFIXES
    if binary:
        value *= 2 ** _BINARY_SUFFIXES[suffix]
    elif suffix in _DECIMAL_SUFFIXES:
        value *= Fraction(10) ** _DECIMAL_SUFFIXES[suffix]
    else:
        # A decimal exponent. apimachinery allows any int32; we stop far earlier,
        # since 10**(2**31) cannot be computed and no resource is near 1e1000.
        exponent = int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise ValueError(f"invalid quantity {text!r}: exponent out of range")
        value *= Fraction(10) ** exponent
    if (value * _NANO).denominator != 1:
        value = Fraction(_round_away(value * _NANO), _NANO)
    if binary and value > _BINARY_CAP:
        value = Fraction(_BINARY_CAP)
    return -value if match["sign"] == "-" else value


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a Kubernetes quantity (or a JSON number) into its exact value.

    Raises `ValueError` naming the input when it is not a quantity.
    """
    if isinstance(value, bool):  # bool is an int; a JSON true is no quantity
        raise ValueError(f"invalid quantity {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"invalid quantity {value!r}")
        # repr() gives the shortest decimal that round-trips, i.e. what the
        # JSON text said; Fraction(float) would keep the binary noise.
        return _parse_text(format(Decimal(repr(value)), "f"))
    if isinstance(value, str):
        return _parse_text(value)
    raise ValueError(f"invalid quantity {value!r}: not a string or number")


def _digits(text: str) -> bool:
    # ASCII only: str.isdigit() also takes "²" and other digits int() reads differently
    return text.isdigit() and text.isascii()


def cpu_millis(value: str | int | float) -> int:
    """CPU in millicores, rounded like `Quantity.MilliValue()`."""
    # "250m" and "2" are most of what a cluster holds (every pod, every
    # NodeMetric entry): read them without Fraction arithmetic.
    if type(value) is str:
        if _digits(value):
            return int(value) * 1000
        if value[-1:] == "m" and _digits(value[:-1]):
            return int(value[:-1])
        # metrics-server's rates are nanocores ("123456789n"), each one different:
        # the Fraction path below would miss the cache for every one.
        if value[-1:] == "n" and _digits(value[:-1]):
            return -(-int(value[:-1]) // 1_000_000)  # rounded up, as away from zero
    return _round_away(parse_quantity(value) * 1000)


def quantity_value(value: str | int | float) -> int:
    """The integer value, rounded like `Quantity.Value()`."""
    if type(value) is str:
        if _digits(value):
            return int(value)
        shift = _BINARY_SUFFIXES.get(value[-2:])
        if shift is not None and _digits(value[:-2]):
            return min(int(value[:-2]) << shift, _BINARY_CAP)
    return _round_away(parse_quantity(value))


def memory_bytes(value: str | int | float) -> int:
    """Memory (or any byte quantity) in bytes, rounded like `Quantity.Value()`."""
    return quantity_value(value)


def format_decimal_si(value: Fraction | int, *, exponent: int = 0) -> str:
    """Canonical DecimalSI text of `value * 10**exponent` ("1500m", "2", "3k").

    The exponent ends on a multiple of three and is as large as it can be
    without fractional digits, as `Quantity.String()` does.
    """
    scaled = Fraction(value) * Fraction(10) ** exponent
    if scaled == 0:
        return "0"
    mantissa, exp = _round_away(scaled * _NANO), -9
    while mantissa % 1000 == 0:
        mantissa //= 1000
        exp += 3
    if exp > 18:  # past "E" there is no suffix; Kubernetes falls back to e-notation
        return f"{mantissa}e{exp}"
    return f"{mantissa}{_EXPONENT_TO_SUFFIX[exp]}"


def format_cpu(millis: int) -> str:
    """Canonical text of a CPU amount: 1500 → "1500m", 2000 → "2"."""
    return format_decimal_si(millis, exponent=-3)


def format_bytes(n: int) -> str:
    """A byte count as a plain integer ("123456789"), which every parser reads."""
    return str(n)


def format_binary_si(n: int) -> str:
    """Canonical BinarySI text of an integer: 1536 Mi → "1536Mi", 2**30 → "1Gi".

    Values below 1024 in magnitude print as plain numbers, as Kubernetes does.
    """
    if -1024 < n < 1024:
        return str(n)
    mantissa, suffix = n, ""
    for name in _BINARY_SUFFIXES:
        if mantissa % 1024:
            break
        mantissa //= 1024
        suffix = name
    return f"{mantissa}{suffix}"


def _to_int(name: str, value: str | int | float) -> int:
    return cpu_millis(value) if name == CPU else quantity_value(value)


# ---------------------------------------------------------------- Go durations
# metav1.Duration travels as Go's time.Duration text ("5m0s").

_SECOND: Final = 10**9
_UNITS: Final = {
    "ns": 1,
    "us": 10**3,
    "\u00b5s": 10**3,  # micro sign
    "\u03bcs": 10**3,  # Greek mu; Go accepts both
    "ms": 10**6,
    "s": _SECOND,
    "m": 60 * _SECOND,
    "h": 3600 * _SECOND,
}
_COMPONENT_RE = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]+)")
_MAX_NS: Final = 2**63 - 1


def _to_ns(value: timedelta | int | float) -> int:
    if isinstance(value, timedelta):
        return (value.days * 86400 + value.seconds) * _SECOND + value.microseconds * 1000
    if isinstance(value, int):
        return value * _SECOND
    return round(value * _SECOND)


def _decimal(amount: int, scale: int) -> str:
    whole, rest = divmod(amount, scale)
    if not rest:
        return str(whole)
    digits = len(str(scale)) - 1
    return f"{whole}.{rest:0{digits}d}".rstrip("0")


def format_go_duration(value: timedelta | int | float) -> str:
    """Go's `time.Duration.String()`: 300 → "5m0s", 90 → "1m30s", 0.5 → "500ms".

    Ints and floats are seconds.
    """
    ns = _to_ns(value)
    if ns == 0:
        return "0s"
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns < _SECOND:
        unit, scale = ("ns", 1) if ns < 1000 else ("\u00b5s", 1000) if ns < 10**6 else ("ms", 10**6)
        return f"{sign}{_decimal(ns, scale)}{unit}"
    minutes, seconds = divmod(ns, 60 * _SECOND)
    hours, minutes = divmod(minutes, 60)
    text = f"{_decimal(seconds, _SECOND)}s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def parse_go_duration(text: str) -> timedelta:
    """Go's `time.ParseDuration` ("1h30m", "90s", "500ms", "-1.5h", "0").

    Precision below a microsecond is lost (timedelta's resolution). Raises
    `ValueError` naming the input.
    """
    body = text[1:] if text[:1] in ("-", "+") else text
    if body == "0":
        return timedelta(0)
    if not body:
        raise ValueError(f"invalid duration {text!r}")
    total, pos = Fraction(0), 0
    while pos < len(body):
        match = _COMPONENT_RE.match(body, pos)
        if match is None or not (match[1] or match[2]):
            raise ValueError(f"invalid duration {text!r}")
        if match[3] not in _UNITS:
            if match[3].isalpha():
                raise ValueError(f"invalid duration {text!r}: unknown unit {match[3]!r}")
            raise ValueError(f"invalid duration {text!r}")
        frac = match[2] or ""
        total += Fraction(int(match[1] + frac or "0"), 10 ** len(frac)) * _UNITS[match[3]]
        pos = match.end()
    ns = int(total)  # Go truncates a fractional nanosecond
    if ns > _MAX_NS:
        raise ValueError(f"invalid duration {text!r}: out of range")
    if text.startswith("-"):
        ns = -ns
    return timedelta(microseconds=round(Fraction(ns, 1000)))


# ---------------------------------------------------------------- Resources

_T = TypeVar("_T")
_INTERNED: dict[tuple[tuple[str, int], ...], Resources] = {}
_INTERN_LIMIT: Final = 8192


class Resources(Mapping[str, int]):
    """An immutable mapping of resource name to integer amount.

    CPU is in millicores, everything else in base units. Missing names read as
    absent (use ``.get(name, 0)``); `+`, `-` and `max_with` treat them as zero.
    Equal to any mapping with the same items, so tests may compare with a dict.
    Instances built through `from_api` are shared between equal values, which
    keeps a large pod cache small (most pods repeat a handful of shapes).

    The amounts live in a private dict, in name order, that nothing ever
    mutates: lookups and iteration go straight to it instead of through the
    generic `Mapping` mixins (`items()` there calls `__getitem__` per name),
    which matters in the descheduler's per-cycle loops over 150,000 pods. The
    views `keys()`, `values()` and `items()` return are read-only. A dict of a
    few names takes about the memory the sorted tuple of pairs did.
    """

    __slots__ = ("_map",)
    _map: dict[str, int]

    def __init__(self, values: Mapping[str, int] | Iterable[tuple[str, int]] = ()) -> None:
        if isinstance(values, Resources):  # already checked and sorted; never mutated
            object.__setattr__(self, "_map", values._map)
            return
        items = dict(values)
        for name, amount in items.items():
            # `type(...) is int` first: the common case costs one comparison.
            if type(amount) is not int and (
                not isinstance(amount, int) or isinstance(amount, bool)
            ):
                raise TypeError(f"resource {name!r}: amount must be an int, got {amount!r}")
        object.__setattr__(self, "_map", dict(sorted(items.items())))

    @classmethod
    def from_api(cls, raw: Mapping[str, Any] | None) -> Resources:
        """Build from an API ResourceList ({"cpu": "500m", "memory": "1Gi"})."""
        if not raw:
            return EMPTY
        try:
            items = {name: _to_int(name, q) for name, q in raw.items()}
        except ValueError as err:
            raise ValueError(f"invalid resource list {dict(raw)!r}: {err}") from err
        return cls.shared(items)

    @classmethod
    def shared(cls, values: Mapping[str, int]) -> Resources:
        """Like the constructor, but returns one instance per distinct value."""
        items = tuple(sorted(values.items()))
        found = _INTERNED.get(items)
        if found is None:
            found = cls(items)
            if len(_INTERNED) < _INTERN_LIMIT:
                _INTERNED[items] = found
        return found

    def to_api(self) -> dict[str, str]:
        """The API ResourceList text: CPU canonical ("1500m"), the rest plain integers."""
        return {n: format_cpu(v) if n == CPU else format_bytes(v) for n, v in self._map.items()}

    @property
    def cpu(self) -> int:
        """CPU in millicores (0 when absent)."""
        return self._map.get(CPU, 0)

    @property
    def memory(self) -> int:
        """Memory in bytes (0 when absent)."""
        return self._map.get(MEMORY, 0)

    # An unhashable name is simply absent, as it was for the tuple of pairs
    # (a dict would raise TypeError); the `try` costs nothing otherwise.

    def __getitem__(self, name: str) -> int:
        try:
            return self._map[name]
        except TypeError:
            raise KeyError(name) from None

    @overload
    def get(self, name: str) -> int | None: ...

    @overload
    def get(self, name: str, default: int | _T) -> int | _T: ...

    def get(self, name: str, default: object = None) -> object:
        try:
            return self._map.get(name, default)
        except TypeError:
            return default

    def __contains__(self, name: object) -> bool:
        try:
            return name in self._map
        except TypeError:
            return False

    def __iter__(self) -> Iterator[str]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def keys(self) -> KeysView[str]:
        return self._map.keys()

    def values(self) -> ValuesView[int]:
        return self._map.values()

    def items(self) -> ItemsView[str, int]:
        return self._map.items()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resources):
            return self._map == other._map
        if isinstance(other, Mapping):
            return self._map == dict(other.items())
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._map.items()))

    def __repr__(self) -> str:
        return f"Resources({self._map!r})"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Resources is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Resources is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Resources, (tuple(self._map.items()),))

    def _combine(self, other: Mapping[str, int], sign: int) -> Resources:
        merged = dict(self._map)
        for name, amount in other.items():
            merged[name] = merged.get(name, 0) + sign * amount
        return Resources(merged)

    def __add__(self, other: Mapping[str, int]) -> Resources:
        return self._combine(other, 1)

    def __sub__(self, other: Mapping[str, int]) -> Resources:
        return self._combine(other, -1)

    def max_with(self, other: Mapping[str, int]) -> Resources:
        """Element-wise maximum (names missing on one side count as 0)."""
        merged = dict(self._map)
        for name, amount in other.items():
            merged[name] = max(merged.get(name, 0), amount)
        return Resources(merged)

    def clamp_min(self, floor: int = 0) -> Resources:
        """Every amount raised to at least `floor` (e.g. usage that cannot go negative)."""
        return Resources({n: max(v, floor) for n, v in self._map.items()})


EMPTY: Final = Resources()  # the shared empty value (also what from_api({}) returns)
