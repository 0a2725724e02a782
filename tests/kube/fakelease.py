"""An in-memory Lease API and a hand-moved clock for the elector's unit tests.

    api = FakeLeaseApi()
    clock = FakeClock()
    elector = leaderelection.LeaderElector(api, config, clock=clock)
    api.hang("GET")            # the next GET blocks until api.answer()
    ...
    clock.advance(1.5)         # wakes the elector's watchdog

`FakeLeaseApi` keeps resourceVersions (a PUT with a stale one gets 409, as the
API server answers) and records every request with the timeout it was given.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass
from typing import Any

from kube import rest

WAIT = 10.0  # real seconds any fake wait may block: a test that forgets to answer fails


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    path: str
    timeout: float | None
    at: float  # the fake clock's monotonic time when the request was sent


class FakeClock:
    """Monotonic and wall time that move only when a test says so (`advance`)."""

    def __init__(self, mono: float = 1_000.0, wall: float = 1_800_000_000.0) -> None:
        self.mono = mono
        self.wall = wall
        self._lock = threading.Lock()
        self._waiting: set[threading.Condition] = set()

    def monotonic(self) -> float:
        return self.mono

    def time(self) -> float:
        return self.wall

    def wait(self, changed: threading.Condition, timeout: float) -> None:
        """Block until notified or until `advance` moves time; callers re-check the clock."""
        with self._lock:
            self._waiting.add(changed)
        changed.wait(WAIT)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.mono += seconds
            self.wall += seconds
            waiting = list(self._waiting)
        for changed in waiting:
            with changed:
                changed.notify_all()


class FakeLeaseApi:
    """GET, POST and PUT of Lease objects, optimistic locking included."""

    def __init__(self, clock: FakeClock) -> None:
        self._clock = clock
        self._objects: dict[str, dict[str, Any]] = {}
        self._version = 0
        self._lock = threading.Lock()
        self.calls: list[Call] = []
        self._hang: set[str] = set()
        self.hung = threading.Event()  # a request is blocked now
        self._answer = threading.Event()

    def hang(self, method: str) -> None:
        """The next `method` request blocks until `answer()`."""
        self._answer.clear()
        self._hang.add(method)

    def answer(self) -> None:
        self._answer.set()

    def lease(self, path: str) -> dict[str, Any]:
        return copy.deepcopy(self._objects[path])

    def request(
        self, method: str, path: str, *, body: Any = None, timeout: float | None = None
    ) -> Any:
        self.calls.append(Call(method, path, timeout, self._clock.monotonic()))
        if method in self._hang:
            self._hang.discard(method)
            self.hung.set()
            assert self._answer.wait(WAIT), "the test never answered a hung request"
            self.hung.clear()
        with self._lock:
            if method == "GET":
                if path not in self._objects:
                    raise rest.ApiError(404, "Not Found", f"{path} not found")
                return copy.deepcopy(self._objects[path])
            if method == "POST":
                target = f"{path}/{body['metadata']['name']}"
                if target in self._objects:
                    raise rest.ApiError(409, "Conflict", f"{target} already exists")
                return self._store(target, body)
            if method == "PUT":
                current = self._objects.get(path)
                if current is None:
                    raise rest.ApiError(404, "Not Found", f"{path} not found")
                sent = body.get("metadata", {}).get("resourceVersion")
                if sent != current["metadata"]["resourceVersion"]:
                    raise rest.ApiError(409, "Conflict", f"{path} was modified")
                return self._store(path, body)
        raise AssertionError(f"the elector sent {method} {path}")

    def _store(self, path: str, body: Any) -> Any:
        self._version += 1
        stored = copy.deepcopy(body)
        stored.setdefault("metadata", {})["resourceVersion"] = str(self._version)
        self._objects[path] = stored
        return copy.deepcopy(stored)
