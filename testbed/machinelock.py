"""One set of real local nodes per machine (`testbed.localnodes`).

Bridges (``nqbr<i>``), pod subnets (``10.244.<i>.0/24``), cgroup roots
(``/nodeqos-<name>``) and the ``kubernetes`` Service route (`testbed.servicenat`)
are names the whole machine shares: two `make e2e` runs at once would put pods
of both clusters on one bridge with clashing addresses and send each other's
pods to the wrong API server. `held` serialises them with an flock; a run that
must wait says so in the log, and gives up after a generous timeout naming
the holder.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)


class LockTimeout(RuntimeError):
    """Another run kept the machine's nodes for longer than we were willing to wait."""


LOCK_PATH = Path("/run/lock/nodeqos-nodes.lock")


@contextlib.contextmanager
def held(path: Path = LOCK_PATH, timeout: float = 1800.0) -> Iterator[None]:
    """Hold the machine's real-node lock; waits (saying so) while another run holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        deadline = time.monotonic() + timeout
        told = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                if time.monotonic() > deadline:
                    raise LockTimeout(
                        f"real nodes of {holder} still run after {timeout:.0f}s ({path}); "
                        "one set of local nodes per machine: stop it, or wait"
                    ) from None
                if not told:
                    log.warning("waiting for the real nodes of %s to stop (%s)", holder, path)
                    told = True
                time.sleep(2)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
