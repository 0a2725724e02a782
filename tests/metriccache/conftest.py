"""Fixtures for the metric cache tests: a hand-driven clock and a cache opener."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metriccache import MetricCache
from tests.metriccache.builders import FakeClock, OpenCache


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def open_cache(tmp_path: Path, clock: FakeClock) -> Iterator[OpenCache]:
    """Open caches (default tmp_path/metrics.db) with the fake clock and no flusher thread."""
    opened: list[MetricCache] = []

    def _open(**overrides: Any) -> MetricCache:
        options: dict[str, Any] = {"clock": clock, "flush_interval": None}
        options.update(overrides)
        path = options.pop("path", tmp_path / "metrics.db")
        cache = MetricCache.open(path, **options)
        opened.append(cache)
        return cache

    yield _open
    for cache in opened:
        cache.close()
