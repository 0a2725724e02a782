"""What `/healthz` reports: each component of the daemon answers for itself.

Nothing waits on a global barrier (docs/design.md, "Beyond the reference" 7): the
daemon registers a probe per component (informers, leader election,
descheduling loop), and a request evaluates every probe at that moment. The
daemon is healthy when every probe says ready; a follower replica is healthy
(it is ready to take over), a replica whose caches have not synced is not.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class State:
    """One component's readiness and a word on it."""

    ready: bool
    detail: str = ""


Probe = Callable[[], State]


class Health:
    """Probes by component name; thread-safe (HTTP threads read, the daemon adds)."""

    __slots__ = ("_lock", "_probes")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._probes: dict[str, Probe] = {}

    def register(self, name: str, probe: Probe) -> None:
        """Add a component; a taken name raises ValueError."""
        with self._lock:
            if name in self._probes:
                raise ValueError(f"component {name!r} is already registered")
            self._probes[name] = probe

    def states(self) -> dict[str, State]:
        """Every component's state now, by name (a probe that raises is not ready)."""
        with self._lock:
            probes = dict(self._probes)
        found = {}
        for name, probe in sorted(probes.items()):
            try:
                found[name] = probe()
            except Exception as err:  # a broken probe must not break /healthz
                found[name] = State(False, f"probe failed: {type(err).__name__}: {err}")
        return found

    def to_json(self) -> dict[str, Any]:
        """The /healthz body: `ready` overall and per component."""
        states = self.states()
        return {
            "ready": bool(states) and all(s.ready for s in states.values()),
            "components": {
                name: {"ready": s.ready, "detail": s.detail} for name, s in states.items()
            },
        }
