"""The descheduling loop: snapshot, Deschedule plugins, Balance plugins, report.

Each cycle (`run_once`) takes one snapshot, then calls every profile's
Deschedule plugins and after them every profile's Balance plugins, in
configuration order (kubernetes-sigs/descheduler runs all deschedule before
all balance, profile by profile). With fewer than two Ready nodes no plugin
runs: an eviction could only disrupt (upstream aborts the same way).

This is the one place that catches broadly (STYLE.md): each plugin call is
isolated, so a plugin that raises is logged with plugin and profile, counted in
`nodeqos_descheduler_plugin_errors_total` and listed in the report, and the
others still run. Every call is timed into
`nodeqos_descheduler_plugin_duration_seconds`.

A CLI builds one Runner from the configuration:

    runner = Runner.from_config(cfg, plugins.registry(), source=source,
                                backend=evictions.EvictionAPI(client, recorder),
                                metrics=Metrics(registry))
    runner.run(stop, cfg.descheduling_interval)      # or: report = runner.run_once()
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from descheduler import config, features, usagesources
from descheduler.config import ExtensionPoint
from descheduler.evictions import Backend
from descheduler.framework.background import BackgroundRequests
from descheduler.framework.cycle import Cycle, CycleCell, mode
from descheduler.framework.evictor import EvictionCore
from descheduler.framework.interfaces import Clock, ControllerPlugin
from descheduler.framework.limits import Ledger, Limits
from descheduler.framework.metrics import Metrics
from descheduler.framework.profiles import ProfileRuntime, build_profiles
from descheduler.framework.reasons import Reason
from descheduler.framework.registry import Registry
from descheduler.framework.report import CycleReport, Note, PluginFailure
from descheduler.framework.snapshot import Snapshot
from descheduler.framework.sources import ClusterSource, SourceNotReady
from kube import backoff, events, rest, selectors

log = logging.getLogger("descheduler.runner")

MIN_NODES = 2
CONTROLLER_RESTART_INITIAL = 1.0  # seconds before a controller that raised runs again
CONTROLLER_RESTART_CAP = 60.0  # and at most this, however often it raises


def utc_now() -> datetime:
    return datetime.now(UTC)


class Runner:
    """Runs descheduling cycles over built profiles. Build it with `from_config`."""

    def __init__(
        self,
        profiles: Sequence[ProfileRuntime],
        *,
        source: ClusterSource,
        core: EvictionCore,
        metrics: Metrics,
        clock: Clock = utc_now,
        node_selector: selectors.LabelSelector | None = None,
        timer: Callable[[], float] = time.perf_counter,
        disabled: Sequence[PluginFailure] = (),
    ) -> None:
        self.profiles = tuple(profiles)
        # Profiles left out at start-up for a broken plugin: every report lists them.
        self.disabled = tuple(disabled)
        for failure in self.disabled:
            log.error(
                "profile %s is not run: plugin %s is broken (%s): %s",
                failure.profile,
                failure.plugin,
                failure.extension_point,
                failure.error,
            )
        self._source = source
        self._core = core
        self._metrics = metrics
        self._clock = clock
        self._node_selector = node_selector
        self._timer = timer
        # how a controller that raised is restarted (tests shorten it)
        self.controller_backoff: Callable[[], backoff.Backoff] = lambda: backoff.Backoff(
            backoff.Policy(
                initial=CONTROLLER_RESTART_INITIAL, cap=CONTROLLER_RESTART_CAP, jitter=0.5
            )
        )
        metrics.dry_run.set(1 if core.dry_run else 0)

    @classmethod
    def from_config(
        cls,
        cfg: config.DeschedulerConfiguration,
        registry: Registry,
        *,
        source: ClusterSource,
        backend: Backend,
        metrics: Metrics,
        clock: Clock = utc_now,
        timer: Callable[[], float] = time.perf_counter,
        client: rest.Rest | None = None,
        recorder: events.Recorder | None = None,
        gates: features.Gates | None = None,
        sources: usagesources.Sources | None = None,
    ) -> Runner:
        """Build every profile (raises `StartupError` listing every problem).

        `client` and `recorder` are handed to plugins through their Handle
        (MigrationController needs both); leave them None offline. `gates`
        defaults to every feature gate's default. `sources` (the actual-usage
        readers) default to what `cfg.metricsProviders` asks for over `client`.
        """
        gates = gates if gates is not None else features.Gates()
        cell = CycleCell()
        core = _eviction_core(cfg, cell, backend, metrics, clock, gates)
        built = build_profiles(
            cfg.profiles,
            registry,
            core=core,
            cell=cell,
            metrics=metrics,
            clock=clock,
            client=client,
            recorder=recorder,
            sources=sources
            if sources is not None
            else usagesources.from_policy(cfg, client, clock=lambda: clock().timestamp()),
        )
        return cls(
            built.profiles,
            disabled=built.disabled,
            source=source,
            core=core,
            metrics=metrics,
            clock=clock,
            node_selector=cfg.node_selector,
            timer=timer,
        )

    @property
    def dry_run(self) -> bool:
        return self._core.dry_run

    # -- one cycle ---------------------------------------------------------------

    def run_once(self) -> CycleReport:
        """One full cycle; never raises because of a plugin."""
        started, start = self._clock(), self._timer()
        dry = self._core.dry_run
        try:
            state = self._source.state()
        except SourceNotReady as err:
            log.warning("%sskipping the cycle: %s", mode(dry), err)
            self._metrics.cycles.labels("skipped").inc()
            return CycleReport(
                started_at=started,
                dry_run=dry,
                duration_seconds=self._timer() - start,
                notes=(Note(Reason.NOT_SYNCED, str(err)),),
            )
        snapshot = Snapshot(state, taken_at=started, node_selector=self._node_selector)
        if self._core.backoff.resting and not dry:  # forget pods that left the cluster
            self._core.backoff.keep_only({pod.uid for pod in snapshot.pods()})
        requests = self._core.background
        if requests is not None:  # KEP-1397: every pod of the cluster, not just selected nodes
            for done in requests.sync(state.pods, started):
                self._metrics.pods_evicted.labels(
                    "success", done.plugin, done.profile, done.namespace, done.node
                ).inc()
        cycle = Cycle(snapshot, Ledger(self._core.limits, requests), dry)
        cell = self._core.cell
        cell.begin(cycle)
        try:
            if len(snapshot.nodes) < MIN_NODES:
                detail = f"fewer than two ready nodes ({len(snapshot.nodes)}); nothing to do"
                cycle.log.notes.append(Note(Reason.TOO_FEW_NODES, detail))
                log.info("%sskipping the cycle: %s", mode(dry), detail)
                self._metrics.cycles.labels("skipped").inc()
            else:
                self._run_plugins(snapshot, cycle)
                self._metrics.cycles.labels("completed").inc()
        finally:
            cell.end()
        duration = self._timer() - start
        self._metrics.cycle_duration.observe(duration)
        report = CycleReport(
            started_at=started,
            dry_run=dry,
            duration_seconds=duration,
            evictions=tuple(cycle.log.evictions),
            skipped=tuple(cycle.log.skipped),
            notes=tuple(cycle.log.notes),
            projections=snapshot.projections(),
            failures=(*self.disabled, *cycle.log.failures),
        )
        log.info(
            "%scycle done in %.3fs: %d evicted, %d passed over, %d plugin errors",
            mode(dry),
            duration,
            len(report.evictions),
            len(report.skipped),
            len(report.failures),
        )
        return report

    def _run_plugins(self, snapshot: Snapshot, cycle: Cycle) -> None:
        views = {p.name: snapshot.restricted(p.node_selector) for p in self.profiles}
        for profile in self.profiles:
            for name, plugin in profile.deschedule:
                self._call(
                    cycle,
                    profile,
                    name,
                    ExtensionPoint.DESCHEDULE,
                    plugin.deschedule,
                    views[profile.name],
                )
        for profile in self.profiles:
            for name, balancer in profile.balance:
                self._call(
                    cycle,
                    profile,
                    name,
                    ExtensionPoint.BALANCE,
                    balancer.balance,
                    views[profile.name],
                )

    def _call(
        self,
        cycle: Cycle,
        profile: ProfileRuntime,
        name: str,
        point: ExtensionPoint,
        method: Callable[[Snapshot], object],
        view: Snapshot,
    ) -> None:
        start = self._timer()
        try:
            method(view)
        except Exception as err:  # the runner isolates plugins: log, count, carry on
            log.exception(
                "%splugin %s (profile %s, %s) failed",
                mode(cycle.dry_run),
                name,
                profile.name,
                point,
            )
            self._metrics.plugin_errors.labels(name, profile.name).inc()
            cycle.log.failures.append(
                PluginFailure(name, profile.name, point.value, f"{type(err).__name__}: {err}")
            )
        finally:
            self._metrics.plugin_duration.labels(name, profile.name, point.value).observe(
                self._timer() - start
            )

    # -- the long run --------------------------------------------------------------

    def start_controllers(self, stop: threading.Event) -> list[threading.Thread]:
        """A daemon thread per ControllerPlugin (`run(stop)`), isolated like plugin calls."""
        threads = []
        for profile in self.profiles:
            for name, plugin in profile.controllers:
                thread = threading.Thread(
                    target=self._controller,
                    args=(profile.name, name, plugin, stop),
                    name=f"controller-{profile.name}-{name}",
                    daemon=True,
                )
                thread.start()
                threads.append(thread)
        return threads

    def _controller(
        self, profile: str, name: str, plugin: ControllerPlugin, stop: threading.Event
    ) -> None:
        """Run a controller for the term; one that raises starts again after a backoff.

        The delay doubles from `controller_backoff`'s initial one up to its cap,
        jittered (`kube.backoff`, the reflector's policy), and starts over once a run
        lasted longer than the cap. A controller that returns is done.
        """
        retry = self.controller_backoff()
        while not stop.is_set():
            began = time.monotonic()
            try:
                plugin.run(stop)
                return
            except Exception:  # isolated like any plugin call
                log.exception("controller %s (profile %s) failed", name, profile)
                self._metrics.plugin_errors.labels(name, profile).inc()
            if time.monotonic() - began > retry.cap:
                retry.reset()
            delay = retry.delay()
            if stop.is_set():
                return
            log.info("restarting controller %s (profile %s) in %.1fs", name, profile, delay)
            stop.wait(delay)

    def run(
        self,
        stop: threading.Event,
        interval: timedelta = timedelta(0),
        on_report: Callable[[CycleReport], None] | None = None,
    ) -> None:
        """Cycle every `interval` until `stop` is set; a zero interval runs one cycle."""
        self.start_controllers(stop)
        while not stop.is_set():
            report = self.run_once()
            if on_report is not None:
                on_report(report)
            if interval <= timedelta(0):
                return
            stop.wait(interval.total_seconds())


def _eviction_core(
    cfg: config.DeschedulerConfiguration,
    cell: CycleCell,
    backend: Backend,
    metrics: Metrics,
    clock: Clock,
    gates: features.Gates,
) -> EvictionCore:
    """The evictor every profile shares: the policy's caps, dry run and background gate."""
    return EvictionCore(
        cell=cell,
        backend=backend,
        metrics=metrics,
        limits=Limits(
            per_node=cfg.max_pods_to_evict_per_node,
            per_namespace=cfg.max_pods_to_evict_per_namespace,
            total=cfg.max_pods_to_evict_total,
        ),
        dry_run=cfg.dry_run,
        clock=clock,
        background=(
            BackgroundRequests() if gates.enabled(features.EVICTIONS_IN_BACKGROUND) else None
        ),
    )
