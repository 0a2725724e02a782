"""Fixtures of the qosmanager tests: a fresh Prometheus registry, metrics, clock, cache."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from metriccache import MetricCache
from qosmanager import QoSMetrics
from tests.qosmanager.builders import FakeClock, new_cache


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def metrics(registry: CollectorRegistry) -> QoSMetrics:
    return QoSMetrics(registry)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cache(clock: FakeClock) -> Iterator[MetricCache]:
    c = new_cache(clock)
    yield c
    c.close()
