"""The descheduler daemon: a client, caches, a runner, leader election, /metrics and /healthz.

    daemon = build(cfg, Options(kubeconfig=...), registry, plugins.registry())  # StartupError
    status = daemon.run()          # blocks; daemon.stop() (a signal handler) ends it

`build` does everything that can fail because of the configuration first
(client credentials, plugins, leader election settings), before any thread
starts or port opens, and raises `StartupError` listing the problems. `run`
then starts the caches and the campaign and runs cycles while this replica
leads (see `leader`): every `deschedulingInterval`, or one pass when it is 0 or
`once` is set.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta

import yaml
from prometheus_client import CollectorRegistry

from descheduler import config, evictions, features, framework
from descheduler.app import health, leader, server, simulate, telemetry
from descheduler.app.notices import config_warnings
from kube import events, rest, serverversion
from kube import telemetry as kube_telemetry

log = logging.getLogger("descheduler")

EXIT_OK = 0
EXIT_NOT_SYNCED = 1  # --once: the caches never synced (the API server is unreachable)
BACKENDS = ("eviction", "delete")
NODEMETRICS_GROUP = "/apis/slo.koordinator.sh/v1alpha1"
SHUTDOWN_JOIN = 10.0  # seconds a shutdown waits for the controllers
STUCK_WARNING = 10.0  # seconds between warnings while a term's controllers linger
STUCK_UNHEALTHY = 60.0  # then /healthz fails, so the liveness probe restarts the replica


class StartupError(Exception):
    """The daemon cannot start; `problems` lists every reason (exit status 2)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(problems))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    """What the command line adds to (or overrides in) the configuration."""

    kubeconfig: str | None = None  # else clientConnection.kubeconfig, else in-cluster
    dry_run: bool = False  # True overrides the configuration's dryRun
    once: bool = False  # one cycle, then exit; no leader election unless asked
    backend: str = "eviction"
    metrics_addr: str | None = None  # else the configuration's, else server.DEFAULT_ADDRESS
    leader_elect: bool | None = None  # None: the configuration's leaderElection.leaderElect
    sync_timeout: float = 60.0  # --once: how long to wait for the caches
    gates: features.Gates = dataclasses.field(default_factory=features.Gates)


def build(
    cfg: config.DeschedulerConfiguration,
    options: Options,
    registry: CollectorRegistry,
    plugins: framework.Registry,
    *,
    addresses: list[str],
) -> Daemon:
    """Everything wired, nothing started. `addresses`: where to serve (may be empty)."""
    for warning in config_warnings(cfg):
        log.warning("%s", warning)
    if options.backend not in BACKENDS:
        raise StartupError([f"unknown eviction backend {options.backend!r}"])
    if options.dry_run:
        cfg = dataclasses.replace(cfg, dry_run=True)
    parsed = _listen_addresses(addresses)
    # Every plugin problem first, before credentials and the network: a throwaway
    # build over an empty cluster raises exactly what the real one would.
    _build_runner(cfg, plugins, framework.StaticSource(), simulate.NoEvictions(), None)
    client = _client(options.kubeconfig or cfg.client_connection.kubeconfig or None, cfg)
    try:
        serverversion.check(client, "nodeqos-descheduler")
    except serverversion.UnsupportedServer as err:
        raise StartupError([str(err)]) from None
    me = leader.identity()
    app_metrics = telemetry.AppMetrics(registry)
    elect = options.leader_elect
    if elect is None:
        elect = cfg.leader_election.leader_elect and not options.once
    leadership = _leadership(client, cfg, me, app_metrics, elect=elect)
    stopping = threading.Event()
    # Events are written off the eviction path, correlated, through a bounded queue.
    recorder = events.Broadcaster(
        client,
        evictions.COMPONENT,
        host=me,
        registry=registry,
        dropped_metric="nodeqos_descheduler_events_dropped_total",
    )
    # Evictions and controller writes go through a client that refuses to send
    # while this replica does not lead, checked just before sending: a request
    # that waited for the rate limiter past the renew deadline is not sent.
    acting = client.guarded(
        lambda: leadership.is_leader, "this replica does not lead now; request not sent"
    )
    backend = leader.LeaderOnly(
        _backend(options.backend, acting, recorder, cfg),
        lambda: leadership.is_leader and not stopping.is_set(),
    )
    source = framework.InformerSource(client, node_metrics=_serves_nodemetrics(client))
    runner = _build_runner(
        cfg, plugins, source, backend, registry, acting, recorder, gates=options.gates
    )
    _log_start(cfg, options, me, elect=elect)
    return Daemon(
        runner=runner,
        source=source,
        leadership=leadership,
        registry=registry,
        addresses=parsed,
        interval=timedelta(0) if options.once else cfg.descheduling_interval,
        sync_timeout=options.sync_timeout if options.once else None,
        stopping=stopping,
        recorder=recorder,
    )


def _listen_addresses(addresses: list[str]) -> list[tuple[str, int]]:
    """The --listen addresses parsed; a bad one is a StartupError."""
    parsed = []
    for address in addresses:
        try:
            parsed.append(server.parse_address(address))
        except ValueError as err:
            raise StartupError([f"listen address: {err}"]) from None
    return parsed


def _leadership(
    client: rest.Rest,
    cfg: config.DeschedulerConfiguration,
    me: str,
    app_metrics: telemetry.AppMetrics,
    *,
    elect: bool,
) -> leader.Leadership:
    """Campaign for the Lease when `elect`, else lead alone; unusable settings are a StartupError."""
    try:
        if elect:
            return leader.Leadership.elected(client, cfg.leader_election, me, app_metrics.leader)
        return leader.Leadership.alone(app_metrics.leader)
    except ValueError as err:
        raise StartupError([str(err)]) from None


def _log_start(
    cfg: config.DeschedulerConfiguration, options: Options, me: str, *, elect: bool
) -> None:
    election = cfg.leader_election
    log.info(
        "nodeqos-descheduler %s (%s): profiles %s, dry-run %s, %s backend, leader election %s",
        kube_telemetry.version(),
        me,
        ", ".join(p.name for p in cfg.profiles) or "none",
        "on" if cfg.dry_run else "off",
        options.backend,
        f"on ({election.resource_namespace}/{election.resource_name})" if elect else "off",
    )


def _build_runner(
    cfg: config.DeschedulerConfiguration,
    plugins: framework.Registry,
    source: framework.ClusterSource,
    backend: evictions.Backend,
    registry: CollectorRegistry | None,
    client: rest.Rest | None = None,
    recorder: events.Recorder | None = None,
    *,
    gates: features.Gates | None = None,
) -> framework.Runner:
    """The runner; offline (no client) for the start-up check, as `simulate` builds it."""
    try:
        return framework.Runner.from_config(
            cfg,
            plugins,
            source=source,
            backend=backend,
            metrics=framework.Metrics(registry if registry is not None else CollectorRegistry()),
            client=client,
            recorder=recorder,
            gates=gates,
        )
    except framework.StartupError as err:
        raise StartupError(err.problems) from None


def _client(kubeconfig: str | None, cfg: config.DeschedulerConfiguration) -> rest.Rest:
    # Imported here, not at the top: the kubernetes package costs about 0.3 s of CPU
    # to import, which --validate, --write-config-to and simulate never need.
    import kubernetes.config

    try:
        return rest.Rest.from_kubeconfig(
            kubeconfig,
            qps=cfg.client_connection.qps,
            burst=cfg.client_connection.burst,
            # informers hold one connection each for their watches (the
            # framework's four, a MigrationController's six) besides requests
            pool_size=32,
        )
    # the kubernetes package reports a malformed kubeconfig in many ways
    except (
        kubernetes.config.ConfigException,
        OSError,
        ValueError,
        TypeError,
        KeyError,
        yaml.YAMLError,
    ) as err:
        where = kubeconfig or "in-cluster credentials or ~/.kube/config"
        raise StartupError([f"cannot load a kubeconfig from {where}: {err}"]) from None


def _backend(
    kind: str, client: rest.Rest, recorder: events.Recorder, cfg: config.DeschedulerConfiguration
) -> evictions.Backend:
    cls = evictions.Delete if kind == "delete" else evictions.EvictionAPI
    return cls(
        client,
        recorder,
        grace_period_seconds=cfg.grace_period_seconds,
        failure_events=cfg.eviction_failure_event_notification,
    )


def _serves_nodemetrics(client: rest.Rest) -> bool:
    """Whether Koordinator's NodeMetric CRD is installed (else that cache never syncs)."""
    try:
        found = client.get(NODEMETRICS_GROUP)
    except rest.ApiError as err:
        if err.not_found:
            log.warning(
                "the NodeMetric CRD (slo.koordinator.sh/v1alpha1) is not installed; "
                "running without NodeMetrics (LowNodeLoad sees no node as a source)"
            )
            return False
        raise StartupError([f"API discovery of {NODEMETRICS_GROUP} failed: {err}"]) from None
    except rest.ApiUnavailable as err:
        log.warning("API discovery failed (%s); assuming NodeMetrics are served", err)
        return True
    return any(r.get("name") == "nodemetrics" for r in found.get("resources") or ())


class Daemon:
    """The running descheduler. `run()` blocks until done or `stop()`."""

    def __init__(
        self,
        *,
        runner: framework.Runner,
        source: framework.InformerSource,
        leadership: leader.Leadership,
        registry: CollectorRegistry,
        addresses: list[tuple[str, int]],
        interval: timedelta,
        sync_timeout: float | None,
        stopping: threading.Event,
        recorder: events.Broadcaster | None = None,
    ) -> None:
        self.runner = runner
        self.recorder = recorder
        self.source = source
        self.leadership = leadership
        self.registry = registry
        self.interval = interval
        self.sync_timeout = sync_timeout
        self._addresses = addresses
        self._stop = stopping
        self.servers: list[server.HttpServer] = []
        self._controllers: list[threading.Thread] = []
        self._lingering: tuple[str, float] | None = None  # a stopped term's controller, since
        self.stuck_unhealthy = STUCK_UNHEALTHY  # tests shorten it
        self.last_report: framework.CycleReport | None = None
        self.checks = health.Health()
        self.checks.register("informers", self._informers_health)
        self.checks.register("leader-election", leadership.health)
        self.checks.register("descheduling", self._cycle_health)

    def stop(self) -> None:
        """Shut down: no new cycle, no further eviction, controllers stopped, lease released."""
        self._stop.set()
        self.leadership.end_term()

    def run(self, on_report: Callable[[framework.CycleReport], None] | None = None) -> int:
        """Serve, campaign and cycle until stopped (or after one pass); the exit status.

        Raises StartupError when an address cannot be bound.
        """
        try:
            for address in self._addresses:
                try:
                    http = server.HttpServer(address, self.registry, self.checks)
                except OSError as err:
                    raise StartupError(
                        [f"cannot listen on {address[0]}:{address[1]}: {err}"]
                    ) from None
                self.servers.append(http)
                host, port = http.address
                log.info("serving /metrics and /healthz on http://%s:%d", host, port)
            self.source.start()
            self.leadership.start(self._stop)
            return self._lead(on_report)
        finally:
            self._shutdown()

    def _lead(self, on_report: Callable[[framework.CycleReport], None] | None) -> int:
        while not self._stop.is_set():
            if not self.leadership.wait_leader(0.2):
                continue  # a follower waits for the lease
            term = self.leadership.term
            if self._stop.is_set() or term.is_set():
                continue
            log.info("leading: running descheduling cycles")
            self._controllers = self.runner.start_controllers(term)
            while not term.is_set():
                if not self._wait_synced(term):
                    if self.sync_timeout is not None and not term.is_set():
                        log.error("caches did not sync within %.0fs", self.sync_timeout)
                        return EXIT_NOT_SYNCED
                    break
                report = self.runner.run_once()
                self.last_report = report
                if on_report is not None:
                    on_report(report)
                if self.interval <= timedelta(0):
                    return EXIT_OK  # one pass (deschedulingInterval 0, or --once)
                term.wait(self.interval.total_seconds())
            self._join_controllers()  # never two terms' controllers at once
            if not self._stop.is_set():
                log.info("not leading any more: cycles stopped; campaigning again")
        return EXIT_OK

    def _join_controllers(self) -> None:
        """Wait until the ending term's controllers have returned from run(stop).

        The next term starts no controller before then: a controller stuck in an
        API call (a hung connection holds it for the client's timeout) would
        otherwise run beside its successor. The wait ends only when they are
        done, or, on shutdown, after `SHUTDOWN_JOIN` (the threads are daemons);
        past `STUCK_UNHEALTHY` /healthz fails, and the liveness probe ends it.
        """
        started = time.monotonic()
        warned = started
        for thread in self._controllers:
            while thread.is_alive():
                self._lingering = (thread.name, started)
                thread.join(0.5)
                now = time.monotonic()
                if self._stop.is_set() and now - started >= SHUTDOWN_JOIN:
                    log.warning(
                        "controller thread %s did not stop within %.0fs; exiting anyway",
                        thread.name,
                        SHUTDOWN_JOIN,
                    )
                    break
                if now - warned >= STUCK_WARNING:
                    warned = now
                    log.warning(
                        "controller thread %s has not stopped for %.0fs; the next term waits",
                        thread.name,
                        now - started,
                    )
        self._lingering = None
        self._controllers = []

    def _wait_synced(self, term: threading.Event) -> bool:
        """Wait for every cache, bounded by `sync_timeout` when set; False if cut short."""
        waited = 0.0
        while not self.source.synced:
            if term.is_set() or (self.sync_timeout is not None and waited >= self.sync_timeout):
                return False
            term.wait(0.1)
            waited += 0.1
        return True

    def _shutdown(self) -> None:
        self.stop()
        self._join_controllers()
        self.leadership.join(timeout=10.0)  # the campaign releases the lease on its way out
        if self.recorder is not None:
            self.recorder.close()  # the last evictions' Events, bounded
        self.source.stop()
        for http in self.servers:
            http.close()
        log.info("descheduler stopped")

    def _informers_health(self) -> health.State:
        if self.source.synced:
            return health.State(True, "every cache synced")
        try:
            self.source.state()
        except framework.SourceNotReady as err:
            return health.State(False, str(err))
        return health.State(True, "every cache synced")

    def _cycle_health(self) -> health.State:
        lingering = self._lingering
        if lingering is not None and time.monotonic() - lingering[1] > self.stuck_unhealthy:
            return health.State(
                False,
                f"controller thread {lingering[0]} of the last term has not stopped for "
                f"{time.monotonic() - lingering[1]:.0f}s",
            )
        report = self.last_report
        if report is None:
            return health.State(True, "no cycle yet")
        return health.State(
            True,
            f"last cycle at {report.started_at.isoformat()}: {len(report.evictions)} evicted, "
            f"{len(report.skipped)} passed over",
        )
