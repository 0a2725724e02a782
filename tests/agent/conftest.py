"""Fixtures for the agent tests: a fake host that is always closed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent.builders import FakeHost, make_host

MakeHost = Callable[..., FakeHost]


@pytest.fixture
def host_factory(tmp_path: Path) -> Iterator[MakeHost]:
    """`host_factory(version, driver, pods, **options)` builds a FakeHost in tmp_path."""
    made: list[FakeHost] = []

    def _make(*args: Any, **kwargs: Any) -> FakeHost:
        host = make_host(tmp_path, *args, **kwargs)
        made.append(host)
        return host

    yield _make
    for host in made:
        host.close()
