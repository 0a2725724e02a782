"""Readiness of the agent's components, as `/healthz` reports it.

Each component registers itself (`readiness.register("collector")`) and says
when it is ready; nothing waits on a global barrier (docs/design.md, "Beyond
the reference" 7). The agent is healthy when every registered component is ready.
Thread-safe: the collection loop writes, the HTTP server's threads read.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ComponentState:
    """One component's readiness and a human-readable word on it."""

    ready: bool
    detail: str


class Component:
    """The handle a component keeps to report its readiness."""

    __slots__ = ("_name", "_readiness")

    def __init__(self, readiness: Readiness, name: str) -> None:
        self._readiness = readiness
        self._name = name

    @property
    def name(self) -> str:
        """The component's name."""
        return self._name

    def set(self, ready: bool, detail: str = "") -> None:
        """Report readiness."""
        self._readiness._set(self._name, ComponentState(ready, detail))


class Readiness:
    """The registry of components and their states."""

    __slots__ = ("_lock", "_states")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._states: dict[str, ComponentState] = {}

    def register(self, name: str, detail: str = "starting") -> Component:
        """Add a component, not ready yet; a taken name raises ValueError."""
        with self._lock:
            if name in self._states:
                raise ValueError(f"component {name!r} is already registered")
            self._states[name] = ComponentState(False, detail)
        return Component(self, name)

    def _set(self, name: str, state: ComponentState) -> None:
        with self._lock:
            self._states[name] = state

    def snapshot(self) -> dict[str, ComponentState]:
        """Every component's current state, by name."""
        with self._lock:
            return dict(self._states)

    def ready(self) -> bool:
        """Whether every registered component is ready (and there is at least one)."""
        states = self.snapshot()
        return bool(states) and all(s.ready for s in states.values())

    def to_json(self) -> dict[str, object]:
        """The /healthz body."""
        states = self.snapshot()
        return {
            "ready": bool(states) and all(s.ready for s in states.values()),
            "components": {
                name: {"ready": s.ready, "detail": s.detail} for name, s in sorted(states.items())
            },
        }


class ComponentHealth:
    """`qosmanager.states.Health` over a `Readiness`: components register on first report.

    The QoS manager names its components as it goes ("qosmanager",
    "qosmanager/BECPUSuppress"), so each is registered the first time it
    reports. Thread-safe: every plugin thread reports.
    """

    __slots__ = ("_components", "_lock", "_readiness")

    def __init__(self, readiness: Readiness) -> None:
        self._readiness = readiness
        self._lock = threading.Lock()
        self._components: dict[str, Component] = {}

    def set(self, component: str, ready: bool, detail: str) -> None:
        """Record whether `component` is ready and why."""
        with self._lock:
            handle = self._components.get(component)
            if handle is None:
                handle = self._readiness.register(component, detail)
                self._components[component] = handle
        handle.set(ready, detail)
