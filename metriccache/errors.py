"""Exceptions raised by the metric cache.

Callers (collectors, the NodeMetric reporter, QoS plugins) catch
`MetricCacheError` to handle every failure of this package in one place;
`SchemaError` is a programming error (a kind or label the registry does not
know) and should normally not be caught at all.
"""

from __future__ import annotations


class MetricCacheError(Exception):
    """Base class of every error raised by `metriccache`."""


class SchemaError(MetricCacheError, ValueError):
    """A sample or query does not fit the kind registry (unknown kind or label)."""


class CapacityError(MetricCacheError):
    """A bounded resource (the key/value store) is full."""


class PersistenceError(MetricCacheError):
    """The backing file cannot be opened or written (permissions, disk, lock)."""


class ClosedError(MetricCacheError):
    """The cache was used after `close()`."""
