"""Go duration strings ("60s", "5m", "1h30m", "1.5s", "300ms") to and from `timedelta`.

Koordinator and kubernetes-sigs/descheduler write durations as `metav1.Duration`,
which is Go's `time.ParseDuration` syntax; a bare number is not accepted there, so
it is not accepted here either. `timedelta` keeps microseconds: a nanosecond part
below one microsecond is rounded, which no descheduler setting cares about.
"""

from __future__ import annotations

from datetime import timedelta

from kube import quantity

_US = 1
_MS = 1_000
_SECOND = 1_000_000
_MINUTE = 60 * _SECOND
_HOUR = 60 * _MINUTE


def parse(text: str) -> timedelta:
    """Parse a Go duration string; raises ValueError with a user-facing message.

    One parser for the whole product (`kube.quantity.parse_go_duration`): it
    refuses what Go refuses, including values beyond Go's int64 nanoseconds
    (about 292 years), which `timedelta` could not hold either.
    """
    return quantity.parse_go_duration(text)


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
