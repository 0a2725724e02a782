"""testbed.machinelock: one set of real local nodes per machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from testbed import machinelock


def test_second_holder_times_out_naming_the_first(tmp_path: Path) -> None:
    """While one run holds the lock another gives up after its timeout, naming the holder."""
    lock = tmp_path / "nodes.lock"
    with (
        machinelock.held(lock),
        pytest.raises(machinelock.LockTimeout, match=f"pid {os.getpid()}"),
        machinelock.held(lock, timeout=0.0),
    ):
        pass


def test_lock_is_free_again_after_release(tmp_path: Path) -> None:
    """Leaving the block releases the lock for the next run."""
    lock = tmp_path / "nodes.lock"
    with machinelock.held(lock):
        pass
    with machinelock.held(lock, timeout=0.0):
        assert lock.read_text() == f"pid {os.getpid()}\n"
