"""The NodeMetric reporter: this node's usage, published as its NodeMetric status.

`Reporter.run(stop)` runs in its own thread, so the API server never holds up
collection. Each report:

1. takes the node's NodeMetric from the states informer (or GETs it while the
   informer has not listed yet) and creates it with koord-manager's default
   spec when it does not exist (POST; 409 means someone else just did), so no
   separate controller is needed, unlike Koordinator;
2. reads the spec's `metricCollectPolicy` (a spec we cannot parse counts as
   unset: the defaults) and builds the status with
   `agent.nodemetric.build_status`, which holds every rule of docs/design.md, "NodeMetric",
   with the peak predictor's `prodReclaimableMetric` when `prediction` is given;
3. PUTs the object, carrying its `resourceVersion`, to the `status`
   subresource; on 409 Conflict it GETs the object again and retries, at
   most `CONFLICT_RETRIES` times; on 404 (deleted meanwhile) it creates it
   again. Every request first takes a token of the reporter's own bucket
   (`rest.TokenBucket`), so no code path can hammer the server.

Scheduling: the first report goes out `first_delay` seconds after start
(soon, so a new or restarted node is visible to the descheduler at once;
two collection rounds later CPU rates exist); then every
`reportIntervalSeconds` of the spec (default 60, at least
`MIN_REPORT_INTERVAL`). When the server is unreachable (or answers 5xx or
429), the next attempt follows a capped exponential backoff (1 s doubling to
`RETRY_CAP` s, well below the report interval), so the first report after
an outage goes out within seconds of the server's return. Other refusals
(403, 422) are bugs or RBAC problems that retrying fast will not fix: they wait
a whole interval - except for the first `FORBIDDEN_GRACE` seconds of a run of
403s, retried on a fresh backoff: a kube-apiserver that has just restarted
answers 403 to every service account until its RBAC caches are synced (the
chaos soak sees it after each restart, longer on a loaded machine), and that
must not cost a whole interval.

Telemetry: `nodeqos_agent_nodemetric_reports_total{result}` (success,
conflict, unavailable, error), `nodeqos_agent_nodemetric_last_success_timestamp_seconds`,
and the `reporter` /healthz component: ready once a report was published; it
stays ready through later failures (they show in its detail and the counter),
because the DaemonSet's liveness probe reads /healthz and restarting the
agent cannot end an API outage, it would only lose the collection in between.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

from agent import health, nodemetric, peak
from agent.schedule import Clock
from kube import backoff as kbackoff
from kube import cache, rest, slo
from metriccache import MetricCache

log = logging.getLogger(__name__)

MIN_REPORT_INTERVAL = 30  # seconds; a shorter spec value is raised to this
FIRST_REPORT_DELAY = 5.0
RETRY_INITIAL = 1.0
RETRY_CAP = 8.0
CONFLICT_RETRIES = 3
FORBIDDEN_GRACE = 30.0  # seconds of 403s retried on the backoff
# At most one request a second on average, a few at once (one report needs
# one PUT, two when the object must be created, up to eight on conflicts).
LIMIT_QPS = 1.0
LIMIT_BURST = 8

_PATH = cache.NODEMETRICS.path()


class Result(enum.Enum):
    """How a report ended; values are metric label values."""

    SUCCESS = "success"
    CONFLICT = "conflict"  # still 409 after CONFLICT_RETRIES fresh reads
    UNAVAILABLE = "unavailable"  # unreachable, 5xx or 429: retried soon
    ERROR = "error"  # any other refusal, or a bug: retried after an interval


@dataclass(frozen=True, slots=True)
class Outcome:
    """One report's result, the report interval the spec asks for, and what happened."""

    result: Result
    interval: float
    detail: str
    status: int | None = None  # the HTTP status of a refusal


class NodeMetricAPI(Protocol):
    """The calls the reporter makes (`kube.rest.Rest` has them; tests use a fake)."""

    def get(self, path: str, **query: str | int | bool) -> Any:
        """GET an object; `rest.ApiError` (404 ...) or `rest.ApiUnavailable`."""
        ...

    def create(self, path: str, body: Any) -> Any:
        """POST an object to a collection."""
        ...

    def replace(self, path: str, body: Any) -> Any:
        """PUT an object."""
        ...


class NodeMetricCopy(Protocol):
    """The informer's copy of the node's NodeMetric (`agent.states.States` has it)."""

    def nodemetric(self) -> Mapping[str, Any] | None:
        """The object, or None (absent, or not listed yet)."""
        ...

    @property
    def nodemetric_synced(self) -> bool:
        """Whether None from `nodemetric()` means "there is none"."""
        ...


class ReporterMetrics:
    """The reporter's metric families, on the registry `main` built."""

    __slots__ = ("last_success", "reports")

    def __init__(self, registry: CollectorRegistry) -> None:
        self.reports = Counter(
            "nodeqos_agent_nodemetric_reports",
            "NodeMetric status reports by result (success, conflict, unavailable, error).",
            ["result"],
            registry=registry,
        )
        for result in Result:  # every series exists from the start, at 0
            self.reports.labels(result.value)
        self.last_success = Gauge(
            "nodeqos_agent_nodemetric_last_success_timestamp_seconds",
            "When the NodeMetric status was last published, in seconds since the epoch.",
            registry=registry,
        )


def parse_policy(obj: Mapping[str, Any]) -> slo.NodeMetricCollectPolicy | None:
    """The object's `spec.metricCollectPolicy`; ValueError when it cannot be read."""
    try:
        return slo.NodeMetricSpec.from_api(obj.get("spec")).collect_policy
    except (TypeError, AttributeError, KeyError) as err:
        raise ValueError(str(err)) from err


def report_interval(policy: slo.NodeMetricCollectPolicy | None) -> float:
    """`reportIntervalSeconds`, defaulted (60) and raised to `MIN_REPORT_INTERVAL`."""
    seconds = policy.report_interval_seconds if policy is not None else None
    if not seconds:
        seconds = slo.NodeMetricCollectPolicy.defaults().report_interval_seconds or 60
    return float(max(MIN_REPORT_INTERVAL, seconds))


class Reporter:
    """Publishes the NodeMetric status; see the module docstring."""

    def __init__(
        self,
        client: NodeMetricAPI,
        node_name: str,
        metric_cache: MetricCache,
        *,
        pods: Callable[[], Mapping[str, nodemetric.PodMeta]],
        informer: NodeMetricCopy,
        metrics: ReporterMetrics,
        ready: health.Component,
        clock: Clock,
        prediction: Callable[[], peak.Reclaimable | None] | None = None,
        first_delay: float = FIRST_REPORT_DELAY,
        backoff: kbackoff.Backoff | None = None,
        limiter: rest.TokenBucket | None = None,
    ) -> None:
        self._client = client
        self._node = node_name
        self._cache = metric_cache
        self._pods = pods
        self._informer = informer
        self._metrics = metrics
        self._ready = ready
        self._clock = clock
        self._prediction = prediction
        self._first_delay = first_delay
        self._backoff = backoff or kbackoff.Backoff(
            kbackoff.Policy(initial=RETRY_INITIAL, cap=RETRY_CAP, jitter=0.5)
        )
        self._stop = threading.Event()
        self._limiter = limiter or rest.TokenBucket(
            LIMIT_QPS, LIMIT_BURST, clock=clock.monotonic, sleep=self._sleep
        )
        self._status_path = cache.NODEMETRICS.path(node_name, subresource="status")
        self._object_path = cache.NODEMETRICS.path(node_name)
        self._interval = report_interval(None)
        self._published = False
        self._failures = 0  # consecutive failed reports
        self._forbidden_since: float | None = None  # monotonic start of a run of 403s
        self._bad_spec: str | None = None  # resourceVersion of a spec already warned about

    # -- one report ----------------------------------------------------------------

    def report(self) -> Outcome:
        """Publish the status once (with the retries the module docstring lists)."""
        try:
            obj = self._current()
            policy = self._policy(obj)
            self._interval = report_interval(policy)
            prod = None if self._prediction is None else self._prediction()
            status = nodemetric.build_status(
                self._cache, self._pods(), self._clock.time(), policy, prod
            )
            self._publish(obj, status)
        except rest.ApiUnavailable as err:
            return Outcome(Result.UNAVAILABLE, self._interval, str(err))
        except rest.ApiError as err:
            if err.status >= 500 or err.too_many_requests:
                return Outcome(Result.UNAVAILABLE, self._interval, str(err))
            result = Result.CONFLICT if err.conflict else Result.ERROR
            return Outcome(result, self._interval, str(err), err.status)
        return Outcome(Result.SUCCESS, self._interval, "")

    def _call(self, method: Callable[..., Any], *args: Any) -> Any:
        self._limiter.take()
        if self._stop.is_set():
            raise rest.ApiUnavailable("the agent is stopping")
        return method(*args)

    def _get(self) -> Mapping[str, Any] | None:
        try:
            found: Mapping[str, Any] = self._call(self._client.get, self._object_path)
        except rest.ApiError as err:
            if err.not_found:
                return None
            raise
        return found

    def _current(self) -> Mapping[str, Any]:
        """The NodeMetric to write the status onto, created when there is none."""
        obj = self._informer.nodemetric()
        if obj is None and not self._informer.nodemetric_synced:
            obj = self._get()
        return obj if obj is not None else self._create()

    def _create(self) -> Mapping[str, Any]:
        body = slo.NodeMetric.for_node(self._node).to_api()
        del body["status"]  # the status subresource ignores it on create
        try:
            created: Mapping[str, Any] = self._call(self._client.create, _PATH, body)
        except rest.ApiError as err:
            if not err.conflict:
                raise
            found = self._get()  # created meanwhile by someone else
            if found is None:
                raise
            return found
        log.info("created NodeMetric %s with the default spec", self._node)
        return created

    def _policy(self, obj: Mapping[str, Any]) -> slo.NodeMetricCollectPolicy | None:
        try:
            return parse_policy(obj)
        except ValueError as err:
            version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
            if version != self._bad_spec:
                self._bad_spec = version
                log.warning("NodeMetric %s: unreadable spec, using defaults: %s", self._node, err)
            return None

    def _publish(self, obj: Mapping[str, Any], status: slo.NodeMetricStatus) -> None:
        wire = status.to_api()
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                self._call(self._client.replace, self._status_path, {**obj, "status": wire})
                return
            except rest.ApiError as err:
                if attempt == CONFLICT_RETRIES or not (err.conflict or err.not_found):
                    raise
                log.debug("NodeMetric %s: %s; reading it again", self._node, err.reason)
                found = self._get() if err.conflict else None
                obj = found if found is not None else self._create()

    # -- the loop ---------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Report until `stop` is set (the thread's target)."""
        self._stop = stop
        delay = self._first_delay
        while not stop.wait(delay):
            started = self._clock.monotonic()
            try:
                outcome = self.report()
            except Exception as err:
                # The reporter must outlive a bug in one report: log it, count it, go on.
                log.exception("NodeMetric report failed")
                outcome = Outcome(Result.ERROR, self._interval, repr(err))
            delay = self._next_delay(outcome, started)
            self._record(outcome, delay)

    def _next_delay(self, outcome: Outcome, started: float) -> float:
        if outcome.result in (Result.UNAVAILABLE, Result.CONFLICT):
            return self._backoff.delay()
        if outcome.status == 403:  # a restarted server, maybe
            now = self._clock.monotonic()
            if self._forbidden_since is None:
                self._forbidden_since = now
                self._backoff.reset()
            if now - self._forbidden_since < FORBIDDEN_GRACE:
                return self._backoff.delay()
        else:
            self._forbidden_since = None
        self._backoff.reset()
        return max(0.0, started + outcome.interval - self._clock.monotonic())

    def _record(self, outcome: Outcome, delay: float) -> None:
        self._metrics.reports.labels(outcome.result.value).inc()
        if outcome.result is Result.SUCCESS:
            now = self._clock.time()
            self._metrics.last_success.set(now)
            when = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            self._ready.set(True, f"published at {when}; next in {delay:.0f}s")
            if self._failures:
                log.info(
                    "NodeMetric %s published again after %d failed attempt(s)",
                    self._node,
                    self._failures,
                )
            self._published, self._failures = True, 0
            return
        self._failures += 1
        detail = f"{outcome.result.value}: {outcome.detail}; retrying in {delay:.0f}s"
        self._ready.set(self._published, detail)
        if self._failures == 1 or outcome.result is Result.ERROR:
            log.warning("NodeMetric %s not published: %s", self._node, detail)
        else:
            log.debug("NodeMetric %s not published: %s", self._node, detail)

    def _sleep(self, seconds: float) -> None:
        self._stop.wait(seconds)
