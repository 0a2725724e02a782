"""The manager daemon: a client, the reconciler, leader election, /metrics and /healthz.

    running = build(Options(...), registry)   # StartupError lists every problem
    running.run()                             # blocks; running.stop() ends it

Two replicas run; only the one holding the Lease (`kube.leaderelection`)
reconciles. Both keep their caches warm, so a follower that takes over passes at
once. The three controllers (NodeSLO reconciler, Batch controller, profile
controller) share one `kube.informerset.Informers`: each resource is watched once
per process, and each controller runs on its own `kube.controller.Controller`. `/healthz` answers per component (informers, config, leader election); a
follower is healthy, a replica whose caches have not synced is not.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import tempfile
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from kube import (
    backoff,
    endpoint,
    events,
    informerset,
    leaderelection,
    rest,
    selectors,
    serverversion,
)
from manager import batchresource, probability, profilecontroller, reconcile, sloconfig
from manager.telemetry import Metrics

log = logging.getLogger("manager")

DEFAULT_ADDRESS = "0.0.0.0:10259"
WATCHES = 11
"""Watch connections the daemon holds open at most, one per resource
(`kube.informerset.Informers`): Nodes, NodeMetrics and the ConfigMap (reconciler and Batch
controller), NodeSLOs, Pods, and the profile controller's up to six (profiles,
PriorityClasses, the policies and bindings where served, and with the webhook its
configurations and the Namespaces; tests/manager check the count)."""
POOL_SIZE = WATCHES + batchresource.WORKERS + reconcile.WRITE_WORKERS + 4
"""Connections kept to the API server: every watch, every Batch worker's patch, every
reconciler writer, and leader election, Events and the profile controller beside
them. A smaller pool makes urllib3 open and discard extra connections ("Connection
pool is full", seen with 16 and with 22) under load."""
CERTIFICATE_RETRY = backoff.Policy(initial=1.0, cap=10.0)
"""How the webhook certificate is fetched again while the API server is unavailable
at start: 1 s doubling to 10 s, 8 attempts (about 45 s)."""
_ADDRESS = re.compile(r"(\[[^\]]*\]|[^:\[\]]*):(\d+)")


class StartupError(Exception):
    """The daemon cannot start; `problems` lists every reason (exit status 2)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(problems))


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    """The command line, typed; `validate` lists every problem with its flag."""

    kubeconfig: str | None = None
    config_namespace: str = sloconfig.CONFIGMAP_NAMESPACE
    config_name: str = sloconfig.CONFIGMAP_NAME
    metrics_addr: str = DEFAULT_ADDRESS
    leader_elect: bool = True
    lease_namespace: str = "nodeqos-system"
    lease_name: str = "nodeqos-manager"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resync_seconds: float = 300.0
    manage_nodemetrics: bool = True
    node_selector: str | None = None
    qps: float = 100.0
    burst: int = 200
    webhook_addr: str = ""  # empty: no probability webhook
    webhook_service: str = "nodeqos-system/nodeqos-manager:443"
    webhook_url: str = ""
    profile_path: str = "auto"  # auto | policy | webhook (manager.profilecontroller)

    def validate(self) -> list[str]:
        """Every problem, as "--flag: what"."""
        problems = []
        for flag, value in (
            ("--config-namespace", self.config_namespace),
            ("--slo-config-name", self.config_name),
            ("--lease-namespace", self.lease_namespace),
            ("--lease-name", self.lease_name),
        ):
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", value) or len(value) > 253:
                problems.append(f"{flag}: {value!r} is not a valid object name")
        try:
            parse_address(self.metrics_addr)
        except ValueError as err:
            problems.append(f"--metrics-addr: {err}")
        if self.node_selector:
            try:
                selectors.parse_selector(self.node_selector)
            except ValueError as err:
                problems.append(f"--node-selector: {err}")
        if self.webhook_addr:
            try:
                parse_address(self.webhook_addr)
            except ValueError as err:
                problems.append(f"--webhook-addr: {err}")
            if not self.webhook_url:
                try:
                    parse_service(self.webhook_service)
                except ValueError as err:
                    problems.append(f"--webhook-service: {err}")
            elif not self.webhook_url.startswith("https://"):
                problems.append(
                    f"--webhook-url: must start with https://, got {self.webhook_url!r}"
                )
        if self.profile_path not in profilecontroller.PATHS:
            problems.append(
                f"--profile-path: must be one of {', '.join(profilecontroller.PATHS)},"
                f" got {self.profile_path!r}"
            )
        elif self.profile_path == "webhook" and not self.webhook_addr:
            problems.append("--profile-path: webhook needs --webhook-addr (the webhook's server)")
        if self.qps <= 0 or self.burst < 1:
            problems.append(
                f"--kube-api-qps, --kube-api-burst: must be > 0, got {self.qps}, {self.burst}"
            )
        if self.resync_seconds <= 0:
            problems.append(f"--resync-seconds: must be > 0, got {self.resync_seconds}")
        if self.leader_elect and not (
            self.lease_duration > self.renew_deadline > self.retry_period > 0
        ):
            problems.append(
                "--lease-duration, --renew-deadline, --retry-period: need "
                f"lease-duration > renew-deadline > retry-period > 0, got {self.lease_duration},"
                f" {self.renew_deadline}, {self.retry_period}"
            )
        return problems


def parse_address(text: str) -> tuple[str, int]:
    """`host:port`, `:port` (every interface) or `[v6]:port`; raises ValueError."""
    match = _ADDRESS.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"must be HOST:PORT, :PORT or [IPv6]:PORT (got {text!r})")
    host, port = match.group(1).strip("[]"), int(match.group(2))
    if port > 65535:
        raise ValueError(f"port {port} is out of range")
    return host or "0.0.0.0", port


def parse_service(text: str) -> tuple[str, str, int]:
    """NAMESPACE/NAME:PORT, how the API server reaches the webhook."""
    found = re.fullmatch(r"([a-z0-9][-a-z0-9]*)/([a-z0-9][-a-z0-9]*):(\d+)", text)
    if found is None or not 0 < int(found.group(3)) < 65536:
        raise ValueError(f"want NAMESPACE/NAME:PORT, got {text!r}")
    return found.group(1), found.group(2), int(found.group(3))


def identity() -> str:
    """hostname_pid_uuid: unique per process, readable in the Lease."""
    return f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


class Daemon:
    """A built manager: `run()` blocks until `stop()`."""

    def __init__(
        self,
        client: rest.Rest,
        options: Options,
        registry: CollectorRegistry,
    ) -> None:
        self.options = options
        self.registry = registry
        self.metrics = Metrics(registry)
        # Events are correlated and written off the controllers' threads, through a
        # bounded queue (a full one drops and counts), as the other daemons do.
        self.recorder = recorder = events.Broadcaster(
            client,
            "nodeqos-manager",
            socket.gethostname(),
            registry=registry,
            dropped_metric="nodeqos_manager_events_dropped_total",
        )
        # The controllers write through a client that refuses to send while this
        # replica does not lead: a write queued before the renew deadline is not
        # sent after it (their own may_act checks come earlier, at a pass's start).
        acting = client.guarded(
            lambda: self.is_leader, "this replica does not lead now; write not sent"
        )
        # the informers only read: they use the unguarded client
        self.informers = informerset.Informers(client)
        self.reconciler = reconcile.Reconciler(
            acting,
            self.metrics,
            recorder,
            namespace=options.config_namespace,
            name=options.config_name,
            resync_seconds=options.resync_seconds,
            manage_nodemetrics=options.manage_nodemetrics,
            node_selector=options.node_selector,
            informers=self.informers,
        )
        self.batch = batchresource.BatchController(
            acting,
            self.metrics,
            recorder,
            namespace=options.config_namespace,
            name=options.config_name,
            node_selector=options.node_selector,
            informers=self.informers,
        )
        self.webhook: probability.Server | None = None
        webhook = None
        if options.webhook_addr:
            certificate, webhook = _probability_webhook(client, options)
            self.webhook = probability.Server(
                parse_address(options.webhook_addr),
                lambda name: self.profiles.percent(name),
                certificate,
                record=lambda decision: self.metrics.probability_draws.labels(decision).inc(),
                profiles=lambda review: self.profiles.review(
                    review, lambda outcome: self.metrics.profile_reviews.labels(outcome).inc()
                ),
            )
        self.profiles = profilecontroller.ProfileController(
            acting,
            recorder,
            webhook=webhook,
            metrics=self.metrics,
            informers=self.informers,
            resync_seconds=options.resync_seconds,
            profile_path=options.profile_path,
        )
        self._stop = threading.Event()
        self._leading = threading.Event()
        self.elector: leaderelection.LeaderElector | None = None
        if options.leader_elect:
            self.elector = leaderelection.LeaderElector(
                client,
                leaderelection.Config(
                    namespace=options.lease_namespace,
                    name=options.lease_name,
                    identity=identity(),
                    lease_duration=options.lease_duration,
                    renew_deadline=options.renew_deadline,
                    retry_period=options.retry_period,
                ),
                on_started=self._started,
                on_stopped=self._stopped,
            )
        else:
            self._started()
        self.server: endpoint.Endpoint | None = None

    def _started(self) -> None:
        self._leading.set()
        self.metrics.leader.set(1)
        self.reconciler.wake()  # a new leader passes at once
        self.batch.wake()
        self.profiles.wake()
        for runtime in (self.reconciler.runtime, self.batch.runtime, self.profiles.runtime):
            runtime.wake()

    def _stopped(self) -> None:
        self._leading.clear()
        self.metrics.leader.set(0)
        if not self._stop.is_set():
            log.warning("lost the leader lease: reconciling stops until it is won back")

    @property
    def is_leader(self) -> bool:
        """Leading now; the elector's answer turns false at the renew deadline itself,
        before its `on_stopped` (which zeroes the gauge) has run."""
        return self._leading.is_set() and (self.elector is None or self.elector.is_leader)

    def health(self) -> dict[str, Any]:
        """The /healthz body: `ready` overall and per component."""
        components: dict[str, dict[str, Any]] = {}
        # not a readiness gate: a cluster without MutatingAdmissionPolicy (before
        # Kubernetes 1.34) or the profile CRD still gets its NodeSLOs
        gating = {id(v.shared) for v in [*self.reconciler.informers(), *self.batch.informers()]}
        for shared in self.informers.all():
            detail = "synced" if shared.synced else f"not synced: {shared.last_error or ''}"
            ready = shared.synced or id(shared) not in gating
            components[f"informer/{shared.name}"] = {"ready": ready, "detail": detail}
        problems = self.metrics.config.problems()
        components["config"] = {
            "ready": True,  # a bad ConfigMap is reported, never a reason to restart us
            "detail": "; ".join(f"{who}: {what}" for who, what in sorted(problems.items())) or "ok",
        }
        if self.elector is None:
            lead = "leader election disabled; this replica always leads"
        elif self.is_leader:
            lead = f"leader ({self.elector.config.identity})"
        else:
            lead = f"follower; leader: {self.elector.observed_holder or 'none yet'}"
        components["leader"] = {"ready": True, "detail": lead}
        return {"ready": all(c["ready"] for c in components.values()), "components": components}

    def run(self) -> int:
        """Serve, campaign and reconcile until `stop()`; returns the exit status."""
        self.server = endpoint.Endpoint(
            parse_address(self.options.metrics_addr),
            self.registry,
            self.health,
            name="manager-http",
        )
        log.info("serving /metrics and /healthz on %s:%d", *self.server.address)
        if self.webhook is not None:
            self.webhook.start()
            log.info("serving the probability webhook on port %d", self.webhook.port)
        self.informers.start()
        batch_loop = threading.Thread(
            target=self.batch.run,
            args=(self._stop, lambda: self.is_leader),
            name="batch-resources",
            daemon=True,
        )
        batch_loop.start()
        profile_loop = threading.Thread(
            target=self.profiles.run,
            args=(self._stop, lambda: self.is_leader),
            name="colocation-profiles",
            daemon=True,
        )
        profile_loop.start()
        campaign = None
        if self.elector is not None:
            campaign = threading.Thread(
                target=self.elector.run, args=(self._stop,), name="leader-election", daemon=True
            )
            campaign.start()
        try:
            self.reconciler.run(self._stop, lambda: self.is_leader)
        finally:
            batch_loop.join(10.0)
            profile_loop.join(10.0)
            self.reconciler.stop()  # the shared informers, and its writers
            if campaign is not None:
                campaign.join(10.0)
            self.server.close()
            if self.webhook is not None:
                self.webhook.stop()
            self.recorder.close()  # the last Events, bounded
        return 0

    def stop(self) -> None:
        self._stop.set()
        for runtime in (self.reconciler.runtime, self.batch.runtime, self.profiles.runtime):
            runtime.wake()


def _probability_webhook(
    client: rest.Rest, options: Options
) -> tuple[probability.Certificate, profilecontroller.Webhook]:
    """The webhook's serving certificate (shared by the replicas through a Secret in the
    lease namespace) and where the API server reaches it."""
    hosts = ["127.0.0.1"]
    client_config: dict[str, Any]
    if options.webhook_url:
        host = urllib.parse.urlsplit(options.webhook_url).hostname or "127.0.0.1"
        hosts.insert(0, host)
        client_config = {"url": options.webhook_url}
    else:
        namespace, name, port = parse_service(options.webhook_service)
        hosts[:0] = [f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local"]
        client_config = {"service": {"namespace": namespace, "name": name, "port": port}}
    workdir = Path(tempfile.mkdtemp(prefix="nodeqos-webhook-"))
    retry = backoff.Backoff(CERTIFICATE_RETRY)
    for attempt in range(8):  # an API server still starting is no reason to exit at once
        try:
            certificate = probability.shared_certificate(
                client, options.lease_namespace, workdir, hosts
            )
            break
        except rest.ApiUnavailable as err:
            if attempt == 7:
                raise StartupError([f"--webhook-addr: no serving certificate: {err}"]) from err
            delay = retry.delay()
            log.warning("webhook certificate: %s; retrying in %.0f s", err, delay)
            time.sleep(delay)
        except (rest.ApiError, RuntimeError) as err:
            raise StartupError([f"--webhook-addr: no serving certificate: {err}"]) from err
    return certificate, profilecontroller.Webhook(client_config, certificate.ca_pem)


def build(options: Options, registry: CollectorRegistry, client: rest.Rest | None = None) -> Daemon:
    """A daemon ready to run; raises StartupError listing every problem."""
    problems = options.validate()
    if client is None and not problems:
        try:
            client = rest.Rest.from_kubeconfig(
                options.kubeconfig, qps=options.qps, burst=options.burst, pool_size=POOL_SIZE
            )
        except Exception as err:  # the kubernetes package reports a bad kubeconfig many ways
            problems.append(f"--kubeconfig: cannot build a client: {err}")
    if client is not None and not problems:
        try:
            serverversion.check(client, "nodeqos-manager")
        except serverversion.UnsupportedServer as err:
            problems.append(str(err))
    if problems or client is None:
        raise StartupError(problems)
    return Daemon(client, options, registry)
