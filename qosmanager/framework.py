"""The QoS plugin framework: the ExtensionPlugin lifecycle, the registry, the manager.

The lifecycle is Koordinator's koordlet QoS extension framework
(`pkg/koordlet/qosmanager/framework/extension.go`): InitFlags, Setup, Run.

1. `PluginRegistry.click_params()` collects every plugin's click options (its
   InitFlags) plus `--qos-extension-plugins`; the agent adds them to its CLI.
2. `Manager.setup_all(client, metric_cache, states)` sets up every registered
   plugin; one that raises fails start-up with `PluginSetupError` naming it.
3. `Manager.start(stop)` returns at once; a supervisor thread waits for the
   states informer's first sync (bounded by `sync_timeout`, reported on
   /healthz while waiting; on timeout the manager gives up visibly and
   `wait()` raises `SyncTimeout`), then runs each enabled plugin's `run(stop)`
   in its own thread. A plugin whose `run` raises is logged, counted in
   `nodeqos_agent_plugin_errors_total{plugin,phase="run"}` and restarted after
   an exponential backoff; `run` returning means the plugin is done.
4. A plugin whose gate is off but which can undo its host changes (it also
   implements `Revertible`) has `revert()` called once, after the first sync:
   a gate turned off across an agent restart leaves nothing of that plugin's
   behind (BECPUIdle's `cpu.idle`). A failure is logged and counted with
   `phase="revert"`.
5. The agent sets `stop` on SIGTERM (`stop_on_sigterm`); `wait()` joins.

Built-in strategies and extension plugins share the registry and the Protocol;
built-ins are gated by the agent's `--feature-gates`, extension plugins by
`--qos-extension-plugins`. Registries are explicit objects: `builtin_registry`
(in `qosmanager.plugins`) builds a fresh one, and a taken name raises.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Protocol, runtime_checkable

import click

import metriccache
from kube import backoff, rest
from qosmanager import features
from qosmanager import metrics as qmetrics
from qosmanager import states as qstates

log = logging.getLogger(__name__)

COMPONENT = "qosmanager"
EXTENSION_GATES_FLAG = "--qos-extension-plugins"


class ExtensionPlugin(Protocol):
    """A QoS plugin: declares flags, is set up with the node's collaborators, runs until stop."""

    def init_flags(self) -> Sequence[click.Parameter]:
        """Click options the plugin reads (they configure it through their callbacks)."""
        ...

    def setup(
        self, client: rest.Rest, metric_cache: metriccache.MetricCache, states: qstates.States
    ) -> None:
        """Keep the collaborators; raise to fail the agent's start-up."""
        ...

    def run(self, stop: threading.Event) -> None:
        """Work until `stop` is set, then return; raising gets the plugin restarted."""
        ...


@runtime_checkable
class Revertible(Protocol):
    """A plugin that can undo what it did to the host (optional, beside `ExtensionPlugin`)."""

    def revert(self) -> None:
        """Undo the plugin's host changes; called when its gate is off."""
        ...


class PluginSetupError(Exception):
    """A plugin failed in `setup`; the agent must not start."""

    def __init__(self, name: str, err: BaseException) -> None:
        super().__init__(f"QoS plugin {name!r} failed to set up: {err}")
        self.plugin = name


class SyncTimeout(Exception):
    """The states informer did not sync in time; no QoS plugin was started."""


@dataclass(frozen=True, slots=True)
class Registration:
    """One registered plugin."""

    name: str
    feature: features.Feature
    plugin: ExtensionPlugin
    builtin: bool


class PluginRegistry:
    """The plugins of one agent, by name; registering a taken name raises ValueError."""

    __slots__ = ("_broken", "_entries")

    def __init__(self) -> None:
        self._entries: dict[str, Registration] = {}
        self._broken: dict[str, str] = {}

    def register(
        self,
        name: str,
        feature_spec: features.FeatureSpec,
        plugin: ExtensionPlugin,
        *,
        builtin: bool = False,
    ) -> Registration:
        """Add `plugin` under the gate `name` (an extension plugin unless `builtin`)."""
        if not name:
            raise ValueError("a QoS plugin needs a name")
        if name in self._entries or name in self._broken:
            raise ValueError(f"QoS plugin {name!r} is already registered")
        entry = Registration(name, features.Feature.of(name, feature_spec), plugin, builtin)
        self._entries[name] = entry
        return entry

    def register_broken(self, name: str, error: str) -> None:
        """Record a plugin that cannot be loaded (replacing any plugin of that name).

        It runs nowhere and declares no flags; enabling it is an error saying `error`.
        """
        self._entries.pop(name, None)
        self._broken[name] = error

    def broken(self) -> dict[str, str]:
        """Name → error of every plugin that could not be loaded."""
        return dict(self._broken)

    def __iter__(self) -> Iterator[Registration]:
        return iter(tuple(self._entries.values()))

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, name: str) -> Registration:
        """The registration of `name`; KeyError naming the known plugins if absent."""
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries)) or "none"
            raise KeyError(f"unknown QoS plugin {name!r}; known plugins: {known}") from None

    def extension_features(self) -> tuple[features.Feature, ...]:
        """The gates `--qos-extension-plugins` accepts, alphabetically."""
        return tuple(sorted((e.feature for e in self if not e.builtin), key=lambda f: f.name))

    def extension_gates(self, flag_value: str | dict[str, bool] = "") -> features.FeatureGates:
        """Extension gates from the flag's value; unknown names raise ValueError.

        Turning a broken plugin on raises ValueError saying why it is broken;
        turning it off is allowed (and means nothing).
        """
        overrides = (
            features.parse_gate_map(flag_value) if isinstance(flag_value, str) else flag_value
        )
        for name, on in overrides.items():
            if on and name in self._broken:
                raise ValueError(f"QoS plugin {name!r} cannot be enabled: {self._broken[name]}")
        wanted = {name: on for name, on in overrides.items() if name not in self._broken}
        return features.FeatureGates(self.extension_features(), wanted)

    def click_params(self) -> list[click.Parameter]:
        """Every plugin's flags plus `--qos-extension-plugins`; a flag declared twice raises."""
        params: list[click.Parameter] = []
        owners: dict[str, str] = {}
        for entry in self:
            for param in entry.plugin.init_flags():
                for opt in [*param.opts, *param.secondary_opts]:
                    if opt in owners:
                        raise ValueError(
                            f"flag {opt} of QoS plugin {entry.name!r} is already declared by"
                            f" {owners[opt]!r}"
                        )
                    owners[opt] = entry.name
                params.append(param)
        known = ", ".join(f.name for f in self.extension_features()) or "none registered"
        params.append(
            click.Option(
                [EXTENSION_GATES_FLAG, "qos_extension_plugins"],
                type=str,
                default="",
                metavar="Name=true|false,...",
                callback=features.gate_map_callback,
                show_default=False,
                help=f"Gates of QoS extension plugins, Name=true|false,... (known: {known}).",
            )
        )
        return params


def register_qos_ext_plugin(
    registry: PluginRegistry,
    name: str,
    feature_spec: features.FeatureSpec,
    plugin: ExtensionPlugin,
) -> Registration:
    """Register an extension plugin (Koordinator's `RegisterQOSExtPlugin`)."""
    return registry.register(name, feature_spec, plugin)


@dataclass(frozen=True, slots=True, kw_only=True)
class Backoff:
    """Restart delays of a crashing plugin: initial, doubling, capped; reset after a long run
    (the delays themselves are `kube.backoff`'s)."""

    initial: float = 1.0
    factor: float = 2.0
    maximum: float = 60.0
    reset_after: float = 300.0


class Manager:
    """Sets up and runs the registered plugins; see the module docstring."""

    def __init__(
        self,
        registry: PluginRegistry,
        *,
        builtin_gates: features.GateSet,
        extension_gates: features.GateSet,
        health: qstates.Health,
        metrics: qmetrics.QoSMetrics,
        sync_timeout: float = 60.0,
        backoff: Backoff = Backoff(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self._builtin_gates = builtin_gates
        self._extension_gates = extension_gates
        self._health = health
        self._metrics = metrics
        self._sync_timeout = sync_timeout
        self._backoff = backoff
        self._clock = clock
        self._states: qstates.States | None = None
        self._threads: list[threading.Thread] = []
        self._error: BaseException | None = None
        self._lock = threading.Lock()

    def enabled(self) -> list[str]:
        """Names of the plugins whose gate is on, in registration order."""
        return [e.name for e in self.registry if self._gate(e)]

    def _gate(self, entry: Registration) -> bool:
        gates = self._builtin_gates if entry.builtin else self._extension_gates
        return gates.enabled(entry.name)

    def setup_all(
        self, client: rest.Rest, metric_cache: metriccache.MetricCache, states: qstates.States
    ) -> None:
        """Set up every registered plugin; the first failure raises `PluginSetupError`."""
        for entry in self.registry:
            try:
                entry.plugin.setup(client, metric_cache, states)
            except Exception as err:
                self._metrics.plugin_errors.labels(entry.name, "setup").inc()
                self._health.set(COMPONENT, False, f"plugin {entry.name} failed to set up: {err}")
                raise PluginSetupError(entry.name, err) from err
            log.debug("QoS plugin %s set up", entry.name)
        self._states = states

    def start(self, stop: threading.Event) -> None:
        """Start the supervisor thread and return; `setup_all` must have succeeded."""
        if self._states is None:
            raise RuntimeError("Manager.start called before setup_all")
        supervisor = threading.Thread(
            target=self._supervise, args=(self._states, stop), name="qos-manager", daemon=True
        )
        with self._lock:
            self._threads.append(supervisor)
        supervisor.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Join every thread; True when all ended. Raises `SyncTimeout` if start-up gave up."""
        deadline = None if timeout is None else self._clock() + timeout
        joined = 0
        while True:
            with self._lock:
                pending = self._threads[joined:]
            if not pending:
                break
            for thread in pending:
                left = None if deadline is None else max(0.0, deadline - self._clock())
                thread.join(left)
                if thread.is_alive():
                    return False
                joined += 1
        if self._error is not None:
            raise self._error
        return True

    def _wait_synced(self, informer: qstates.States, stop: threading.Event) -> bool:
        started = self._clock()
        while not stop.is_set():
            waited = self._clock() - started
            if waited >= self._sync_timeout:
                return False
            self._health.set(
                COMPONENT, False, f"waiting for the states informer's first sync ({waited:.0f}s)"
            )
            if informer.wait_synced(min(1.0, self._sync_timeout - waited)):
                return True
        return False

    def _supervise(self, informer: qstates.States, stop: threading.Event) -> None:
        if not self._wait_synced(informer, stop):
            if stop.is_set():
                return
            detail = (
                f"states informer did not sync within {self._sync_timeout:g}s;"
                " QoS plugins not started"
            )
            log.error("%s", detail)
            self._metrics.plugin_errors.labels(COMPONENT, "sync").inc()
            self._health.set(COMPONENT, False, detail)
            self._error = SyncTimeout(detail)
            return
        names = self.enabled()
        for name in names:
            entry = self.registry.get(name)
            thread = threading.Thread(
                target=self._run_plugin, args=(entry, stop), name=f"qos-{name}", daemon=True
            )
            with self._lock:
                self._threads.append(thread)
            thread.start()
        running = ", ".join(names) or "none enabled"
        log.info("QoS plugins started: %s", running)
        self._health.set(COMPONENT, True, f"running: {running}")
        for entry in self.registry:
            if entry.name not in names and isinstance(entry.plugin, Revertible):
                self._revert(entry.name, entry.plugin)

    def _revert(self, name: str, plugin: Revertible) -> None:
        try:
            plugin.revert()
        except Exception:
            self._metrics.plugin_errors.labels(name, "revert").inc()
            log.exception("QoS plugin %s is off and could not revert its changes", name)

    def _run_plugin(self, entry: Registration, stop: threading.Event) -> None:
        component = f"{COMPONENT}/{entry.name}"
        retry = backoff.Backoff(
            backoff.Policy(
                initial=self._backoff.initial,
                cap=max(self._backoff.initial, self._backoff.maximum),
                factor=self._backoff.factor,
            )
        )
        while not stop.is_set():
            self._health.set(component, True, "running")
            started = self._clock()
            try:
                entry.plugin.run(stop)
            except Exception as err:
                self._metrics.plugin_errors.labels(entry.name, "run").inc()
                if self._clock() - started >= self._backoff.reset_after:
                    retry.reset()
                delay = retry.delay()
                log.exception("QoS plugin %s failed; restarting in %gs", entry.name, delay)
                self._health.set(component, False, f"failed: {err!r}; restarting in {delay:g}s")
                if stop.wait(delay):
                    break
                continue
            if not stop.is_set():
                log.info("QoS plugin %s finished", entry.name)
            break
        self._health.set(component, False, "stopped")


def stop_on_sigterm(stop: threading.Event) -> None:
    """Set `stop` on SIGTERM and SIGINT (call from the main thread)."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s; stopping QoS plugins", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
