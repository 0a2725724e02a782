"""Go duration strings ("60s", "5m", "1h30m", "1.5s", "300ms") to and from `timedelta`.

Koordinator and kubernetes-sigs/descheduler write durations as `metav1.Duration`,
which is Go's `time.ParseDuration` syntax; a bare number is not accepted there, so
it is not accepted here either. `timedelta` keeps microseconds: a nanosecond part
below one microsecond is rounded, which no descheduler setting cares about.
"""

from __future__ import annotations

import re
from datetime import timedelta
from fractions import Fraction

# Nanoseconds per unit, as in Go's time package (both micro signs are accepted there).
_UNITS = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,
    "\u03bcs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_TERM = re.compile(r"(\d*)(?:\.(\d*))?([a-z\u00b5\u03bc]+)")
_US = 1
_MS = 1_000
_SECOND = 1_000_000
_MINUTE = 60 * _SECOND
_HOUR = 60 * _MINUTE


def parse(text: str) -> timedelta:
    """Parse a Go duration string; raises ValueError with a user-facing message."""
    body = text
    sign = 1
    if body[:1] in ("-", "+"):
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    if body == "0":
        return timedelta(0)
    if not body:
        raise ValueError(f"invalid duration {text!r}")
    total = Fraction(0)
    position = 0
    while position < len(body):
        match = _TERM.match(body, position)
        if match is None or not (match.group(1) or match.group(2)):
            raise ValueError(f"invalid duration {text!r}")
        whole, fraction, unit = match.groups()
        if unit not in _UNITS:
            raise ValueError(f"unknown unit {unit!r} in duration {text!r}")
        value = Fraction(int(whole or "0"))
        if fraction:
            value += Fraction(int(fraction), 10 ** len(fraction))
        total += value * _UNITS[unit]
        position = match.end()
    microseconds = round(total / 1_000)
    return timedelta(microseconds=sign * microseconds)


def _decimal(value: int, unit: int) -> str:
    """`value / unit` written without trailing zeros: 1500, 1000 -> "1.5"."""
    whole, rest = divmod(value, unit)
    if not rest:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{rest:0{digits}d}".rstrip("0")


def render(value: timedelta) -> str:
    """Write a duration the way Go's `Duration.String` does ("1h30m0s", "500ms")."""
    microseconds = value // timedelta(microseconds=1)
    if microseconds == 0:
        return "0s"
    sign = "-" if microseconds < 0 else ""
    microseconds = abs(microseconds)
    if microseconds < _MS:
        return f"{sign}{microseconds}us"
    if microseconds < _SECOND:
        return f"{sign}{_decimal(microseconds, _MS)}ms"
    hours, rest = divmod(microseconds, _HOUR)
    minutes, rest = divmod(rest, _MINUTE)
    text = sign
    if hours:
        text += f"{hours}h"
    if hours or minutes:
        text += f"{minutes}m"
    return f"{text}{_decimal(rest, _SECOND)}s"
