"""Eviction backends for the descheduler: the Eviction API (default) and Delete.

    backend = evictions.EvictionAPI(client, events.Recorder(client, evictions.COMPONENT))
    backend.evict(pod, evictions.EvictOptions(plugin="LowNodeLoad", reason="node hot"))

The framework's evictor calls a backend only after a pod passed every filter and
limit, and never in dry-run mode.
"""

from descheduler.evictions.backends import (
    COMPONENT,
    EVENT_REASON,
    FAILURE_EVENT_REASON,
    Backend,
    Delete,
    EvictionAPI,
    EvictOptions,
    event_message,
)

__all__ = [
    "COMPONENT",
    "EVENT_REASON",
    "FAILURE_EVENT_REASON",
    "Backend",
    "Delete",
    "EvictOptions",
    "EvictionAPI",
    "event_message",
]
