"""The key/value half of the metric cache: static node facts as JSON values.

Used through `MetricCache.kv_set` / `kv_get` / `kv_delete` (CPU topology,
the node's allocatable, and the like). Values are stored as compact JSON text,
in memory for reads and written through to the backing file at once: facts
are few and rarely change, so there is no reason to wait for a flush.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import cast

from metriccache import store as storage
from metriccache.errors import CapacityError
from metriccache.model import JSONValue

log = logging.getLogger(__name__)

_ENTRY_OVERHEAD = 160  # two str headers and a dict slot, rounded up


def entry_cost(key: str, text: str) -> int:
    """Bytes one entry is charged against `max_bytes` (bounds its real memory)."""
    # The UTF-8 length is at least CPython's in-memory size of the characters.
    return len(key.encode()) + len(text) + _ENTRY_OVERHEAD


class KeyValueStore:
    """JSON values by key, at most `max_bytes` of them; thread-safe."""

    __slots__ = ("_bytes", "_lock", "_store", "_texts", "max_bytes")

    def __init__(self, store: storage.Store | None, texts: dict[str, str], max_bytes: int) -> None:
        self._store = store
        self._texts = texts
        self.max_bytes = max_bytes
        self._bytes = sum(entry_cost(k, v) for k, v in texts.items())
        if self._bytes > max_bytes:  # kv_max_bytes was lowered since the file was written
            log.warning(
                "metric cache kv holds %d bytes, over kv_max_bytes=%d", self._bytes, max_bytes
            )
        self._lock = threading.Lock()

    def set(self, key: str, value: JSONValue) -> None:
        """Store `value` durably; `CapacityError` if over `max_bytes`, TypeError if not JSON."""
        try:
            text = json.dumps(value, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as err:
            raise TypeError(f"kv value for {key!r} is not JSON-serialisable: {err}") from err
        with self._lock:
            old = self._texts.get(key)
            size = (
                self._bytes + entry_cost(key, text) - (0 if old is None else entry_cost(key, old))
            )
            if size > self.max_bytes:
                raise CapacityError(f"kv store would hold {size} bytes, over {self.max_bytes}")
            if self._store is not None:
                self._store.put_kv(key, text)
            self._texts[key] = text
            self._bytes = size

    def get(self, key: str, default: JSONValue = None) -> JSONValue:
        """A fresh copy of the value under `key`, or `default`."""
        text = self._texts.get(key)
        return default if text is None else cast(JSONValue, json.loads(text))

    def keys(self, prefix: str = "") -> list[str]:
        """The keys starting with `prefix`, sorted."""
        with self._lock:
            return sorted(k for k in self._texts if k.startswith(prefix))

    def delete(self, key: str) -> None:
        """Forget `key` (no error if absent)."""
        with self._lock:
            if self._store is not None:
                self._store.put_kv(key, None)
            old = self._texts.pop(key, None)
            if old is not None:
                self._bytes -= entry_cost(key, old)
