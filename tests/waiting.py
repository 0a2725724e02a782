"""Waiting on a condition with a deadline: the one `eventually` every test uses.

Tests that watch another thread, process or server poll for the state they
expect instead of sleeping a fixed time, so they are as fast as the machine
allows and robust when it is busy (CI runs beside stress-ng):

    pod = eventually(lambda: informer.get("default/p1"), "the pod cached", timeout=30)

`check` is called until it returns something truthy, which `eventually`
returns; past `timeout` seconds it fails with an AssertionError naming `what`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(
    check: Callable[[], T],
    what: str,
    timeout: float = 15.0,
    *,
    interval: float = 0.05,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> T:
    """Poll `check` every `interval` s until it is truthy and return its value; fail after `timeout` s."""
    deadline = clock() + timeout
    while True:
        value = check()
        if value:
            return value
        if clock() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        sleep(interval)
