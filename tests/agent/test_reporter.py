"""The NodeMetric reporter against a small in-memory API: create, PUT, conflicts, outages, schedule."""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from agent import health, nodemetric, reporter
from kube import backoff, classify, rest, slo
from metriccache import MetricCache, Sample, kinds
from tests.agent.builders import T0, FakeClock

NODE = "node-a"
GIB = 1 << 30
UID = "11111111-1111-1111-1111-111111111111"


class FakeNodeMetrics:
    """NodeMetrics in memory, with the API server's resourceVersion and 404/409 rules.

    `failures` are raised, in order, by the next calls instead of answering them.
    """

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.failures: list[Exception] = []
        self._rv = 100

    def _next(self, method: str, path: str) -> None:
        self.calls.append((method, path))
        if self.failures:
            raise self.failures.pop(0)

    def _bump(self, obj: dict[str, Any]) -> dict[str, Any]:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        return copy.deepcopy(obj)

    def get(self, path: str, **query: str | int | bool) -> Any:
        self._next("GET", path)
        name = path.rsplit("/", 1)[1]
        if name not in self.objects:
            raise rest.ApiError(404, "NotFound", f"nodemetrics {name!r} not found")
        return copy.deepcopy(self.objects[name])

    def create(self, path: str, body: Any) -> Any:
        self._next("POST", path)
        name = body["metadata"]["name"]
        if name in self.objects:
            raise rest.ApiError(409, "AlreadyExists", f"nodemetrics {name!r} already exists")
        obj = copy.deepcopy(body)
        obj.setdefault("status", {})
        self.objects[name] = obj
        return self._bump(obj)

    def replace(self, path: str, body: Any) -> Any:
        self._next("PUT", path)
        assert path.endswith("/status"), path
        name = path.rsplit("/", 2)[1]
        current = self.objects.get(name)
        if current is None:
            raise rest.ApiError(404, "NotFound", f"nodemetrics {name!r} not found")
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise rest.ApiError(409, "Conflict", "the object has been modified")
        current["status"] = copy.deepcopy(body["status"])  # the status subresource: spec ignored
        return self._bump(current)

    def put_spec(self, policy: Mapping[str, Any]) -> None:
        """Someone (koord-manager, a user) creates the object with this collect policy."""
        self.objects[NODE] = {
            "apiVersion": slo.API_VERSION,
            "kind": "NodeMetric",
            "metadata": {"name": NODE},
            "spec": {"metricCollectPolicy": dict(policy)},
        }
        self._bump(self.objects[NODE])


class FakeCopy:
    """The informer's copy: a fixed object (or None), synced or not."""

    def __init__(self, obj: Mapping[str, Any] | None = None, *, synced: bool = True) -> None:
        self.obj = obj
        self.synced = synced

    def nodemetric(self) -> Mapping[str, Any] | None:
        return self.obj

    @property
    def nodemetric_synced(self) -> bool:
        return self.synced


class CountingBucket(rest.TokenBucket):
    """A limiter that never waits and counts the tokens taken."""

    def __init__(self) -> None:
        super().__init__(1000.0, 1000)
        self.taken = 0

    def take(self) -> None:
        self.taken += 1


class Harness:
    def __init__(self, api: FakeNodeMetrics | None = None, copy_: FakeCopy | None = None) -> None:
        self.api = api or FakeNodeMetrics()
        self.copy = copy_ or FakeCopy(synced=False)
        self.clock = FakeClock(wall=T0 + 600)
        self.registry = CollectorRegistry()
        self.readiness = health.Readiness()
        self.limiter = CountingBucket()
        self.cache = MetricCache(clock=self.clock.time)
        now = self.clock.time()
        samples = []
        for i in range(100):
            t = now - 99 + i
            samples += [
                Sample(kinds.NODE_CPU_USAGE, {}, t, 1.5),
                Sample(kinds.NODE_MEMORY_USAGE, {}, t, 4 * GIB),
                Sample(kinds.SYSTEM_CPU_USAGE, {}, t, 1.0),
                Sample(kinds.SYSTEM_MEMORY_USAGE, {}, t, GIB),
                Sample(kinds.POD_CPU_USAGE, {kinds.POD_UID: UID}, t, 0.5),
                Sample(kinds.POD_MEMORY_USAGE, {kinds.POD_UID: UID}, t, 3 * GIB),
            ]
        self.cache.append(samples)
        pods = {
            UID: nodemetric.PodMeta(
                uid=UID,
                name="web",
                namespace="shop",
                priority=classify.PriorityClass.PROD,
                qos=classify.KoordQOS.LS,
            )
        }
        self.reporter = reporter.Reporter(
            self.api,
            NODE,
            self.cache,
            pods=lambda: pods,
            informer=self.copy,
            metrics=reporter.ReporterMetrics(self.registry),
            ready=self.readiness.register("reporter", "no report yet"),
            clock=self.clock,
            backoff=backoff.Backoff(
                backoff.Policy(initial=1.0, cap=8.0, jitter=0.5), rand=lambda: 1.0
            ),
            limiter=self.limiter,
        )

    def reports(self, result: str) -> float:
        value = self.registry.get_sample_value(
            "nodeqos_agent_nodemetric_reports_total", {"result": result}
        )
        return value or 0.0

    def published(self) -> dict[str, Any]:
        return self.api.objects[NODE]["status"]  # type: ignore[no-any-return]


def test_creates_the_nodemetric_with_the_default_spec_then_publishes() -> None:
    """No NodeMetric: POST one with koord-manager's defaults, then PUT the status on it."""
    h = Harness(copy_=FakeCopy(None, synced=True))
    outcome = h.reporter.report()
    assert outcome == reporter.Outcome(reporter.Result.SUCCESS, 60.0, "")
    assert [m for m, _ in h.api.calls] == ["POST", "PUT"]
    obj = h.api.objects[NODE]
    assert (
        obj["spec"]
        == slo.NodeMetricSpec(collect_policy=slo.NodeMetricCollectPolicy.defaults()).to_api()
    )
    status = h.published()
    assert status["updateTime"] == "2023-11-14T22:23:20Z"
    assert status["nodeMetric"]["nodeUsage"] == {
        "resources": {"cpu": "1500m", "memory": str(4 * GIB)}
    }
    assert status["nodeMetric"]["systemUsage"] == {"resources": {"cpu": "1", "memory": str(GIB)}}
    assert status["podsMetric"] == [
        {
            "name": "web",
            "namespace": "shop",
            "podUsage": {"resources": {"cpu": "500m", "memory": str(3 * GIB)}},
            "priority": "koord-prod",
            "qos": "LS",
        }
    ]
    assert h.limiter.taken == 2  # every request took a token


def test_before_the_informer_lists_it_reads_the_object_itself() -> None:
    """Informer not synced: GET the object (its spec decides the windows), no create."""
    h = Harness()
    h.api.put_spec({"aggregateDurationSeconds": 60, "nodeAggregatePolicy": {"durations": ["1m"]}})
    assert h.reporter.report().result is reporter.Result.SUCCESS
    assert [m for m, _ in h.api.calls] == ["GET", "PUT"]
    aggregated = h.published()["nodeMetric"]["aggregatedNodeUsages"]
    assert [a["duration"] for a in aggregated] == ["1m0s"]
    assert aggregated[0]["usage"]["p99"] == {"resources": {"cpu": "1500m", "memory": str(4 * GIB)}}


def test_a_stale_copy_conflicts_and_is_read_again() -> None:
    """The informer's copy is behind: 409, GET the current object, PUT again - one success."""
    h = Harness()
    h.api.put_spec({})
    stale = copy.deepcopy(h.api.objects[NODE])
    h.api.put_spec({"reportIntervalSeconds": 45})  # changed since the informer saw it
    h.copy.obj, h.copy.synced = stale, True
    assert h.reporter.report().result is reporter.Result.SUCCESS
    assert [m for m, _ in h.api.calls] == ["PUT", "GET", "PUT"]
    assert h.published()["nodeMetric"]["nodeUsage"]["resources"]["cpu"] == "1500m"


def test_conflicts_are_retried_a_bounded_number_of_times() -> None:
    """A status that conflicts every time gives up after CONFLICT_RETRIES fresh reads."""
    h = Harness()
    h.api.put_spec({})
    h.copy.obj, h.copy.synced = copy.deepcopy(h.api.objects[NODE]), True
    replace = h.api.replace

    def always_conflicts(path: str, body: Any) -> Any:
        h.api.put_spec({})  # someone else writes between our read and our write, every time
        return replace(path, body)

    h.api.replace = always_conflicts  # type: ignore[method-assign]
    assert h.reporter.report().result is reporter.Result.CONFLICT
    methods = [m for m, _ in h.api.calls]
    assert methods == ["PUT"] + ["GET", "PUT"] * reporter.CONFLICT_RETRIES


def test_deleted_meanwhile_is_created_again() -> None:
    """The PUT answers 404 (someone deleted the object): create it and publish on it."""
    h = Harness()
    h.api.put_spec({})
    h.copy.obj, h.copy.synced = copy.deepcopy(h.api.objects[NODE]), True
    del h.api.objects[NODE]
    assert h.reporter.report().result is reporter.Result.SUCCESS
    assert [m for m, _ in h.api.calls] == ["PUT", "POST", "PUT"]
    assert h.published()["nodeMetric"]["nodeUsage"]["resources"]["cpu"] == "1500m"


def test_created_by_someone_else_meanwhile_is_read() -> None:
    """The informer saw no object but the POST answers 409: GET it and publish on it."""
    h = Harness(copy_=FakeCopy(None, synced=True))
    h.api.put_spec({})
    assert h.reporter.report().result is reporter.Result.SUCCESS
    assert [m for m, _ in h.api.calls] == ["POST", "GET", "PUT"]


@pytest.mark.parametrize(
    ("error", "result"),
    [
        pytest.param(rest.ApiUnavailable("connection refused"), "unavailable", id="unreachable"),
        pytest.param(rest.ApiError(503, "ServiceUnavailable", "etcd"), "unavailable", id="5xx"),
        pytest.param(rest.ApiError(429, "TooManyRequests", "slow down"), "unavailable", id="429"),
        pytest.param(rest.ApiError(403, "Forbidden", "rbac"), "error", id="forbidden"),
        pytest.param(rest.ApiError(422, "Invalid", "schema"), "error", id="invalid"),
    ],
)
def test_failures_are_classified(error: Exception, result: str) -> None:
    """Outages and overload are `unavailable` (retried soon); refusals are `error`."""
    h = Harness()
    h.api.failures = [error]
    assert h.reporter.report().result.value == result


@pytest.mark.parametrize(
    ("policy", "interval"),
    [
        pytest.param({}, 60.0, id="default"),
        pytest.param({"reportIntervalSeconds": 10}, 30.0, id="raised-to-minimum"),
        pytest.param({"reportIntervalSeconds": 30}, 30.0, id="minimum"),
        pytest.param({"reportIntervalSeconds": 120}, 120.0, id="longer"),
    ],
)
def test_report_interval_comes_from_the_spec(policy: dict[str, Any], interval: float) -> None:
    """reportIntervalSeconds: default 60, never below 30."""
    h = Harness()
    h.api.put_spec(policy)
    assert h.reporter.report().interval == interval


def test_an_unreadable_spec_means_the_defaults() -> None:
    """A duration we cannot parse does not stop reporting: the default windows are used."""
    h = Harness()
    h.api.put_spec({"nodeAggregatePolicy": {"durations": ["soon"]}})
    assert h.reporter.report().result is reporter.Result.SUCCESS
    aggregated = h.published()["nodeMetric"]["aggregatedNodeUsages"]
    assert [a["duration"] for a in aggregated] == ["5m0s", "10m0s", "30m0s"]


class ScriptedStop(threading.Event):
    """A stop event whose waits move the fake clock; it stops after `rounds` waits."""

    def __init__(self, clock: FakeClock, rounds: int, on_wait: Any = None) -> None:
        super().__init__()
        self.clock, self.rounds, self.waits = clock, rounds, []  # type: ignore[var-annotated]
        self.on_wait = on_wait

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None
        self.waits.append(round(timeout, 3))
        self.clock.advance(timeout)
        if self.on_wait is not None:
            self.on_wait(len(self.waits))
        return len(self.waits) > self.rounds


def test_schedule_backs_off_during_an_outage_and_returns_to_the_interval() -> None:
    """First report after first_delay; outage: 1, 2, 4, 8, 8 s; back: the interval again."""
    h = Harness()
    h.api.put_spec({"reportIntervalSeconds": 30})
    down = rest.ApiUnavailable("connection refused")

    def script(waits: int) -> None:
        if waits == 2:  # after the first success the server goes away for 5 attempts
            h.api.failures = [down] * 5

    stop = ScriptedStop(h.clock, rounds=8, on_wait=script)
    h.reporter.run(stop)
    assert stop.waits == [reporter.FIRST_REPORT_DELAY, 30, 1, 2, 4, 8, 8, 30, 30]
    assert h.reports("success") == 3 and h.reports("unavailable") == 5
    assert h.registry.get_sample_value(
        "nodeqos_agent_nodemetric_last_success_timestamp_seconds"
    ) == pytest.approx(h.clock.time() - 30)


def test_403s_are_retried_soon_for_a_while_then_wait_an_interval() -> None:
    """A restarted API server refuses everyone until its RBAC caches sync: a run of 403s
    is retried on a fresh backoff for FORBIDDEN_GRACE seconds, then every interval."""
    h = Harness()
    h.api.put_spec({"reportIntervalSeconds": 30})
    forbidden = rest.ApiError(403, "Forbidden", "rbac")

    def script(waits: int) -> None:
        if waits == 2:
            h.api.failures = [forbidden] * 8
        if waits == 11:  # a later, short one starts its backoff afresh
            h.api.failures = [forbidden]

    stop = ScriptedStop(h.clock, rounds=12, on_wait=script)
    h.reporter.run(stop)
    assert stop.waits == [reporter.FIRST_REPORT_DELAY, 30, 1, 2, 4, 8, 8, 8, 30, 30, 30, 1, 30]
    assert h.reports("error") == 9 and h.reports("success") == 3


def test_readiness_turns_ready_on_the_first_publish_and_stays_ready() -> None:
    """Not ready before anything was published; ready after, also while the API is down."""
    h = Harness()
    h.api.failures = [rest.ApiUnavailable("connection refused")]
    component = lambda: h.readiness.snapshot()["reporter"]  # noqa: E731

    def script(waits: int) -> None:
        if waits == 2:
            assert component().ready is False
            assert "unavailable: connection refused; retrying in 1s" in component().detail
        if waits == 3:
            assert component().ready is True
            h.api.failures = [rest.ApiUnavailable("connection refused")]
        if waits == 4:
            assert component().ready is True
            assert component().detail.startswith("unavailable")

    h.reporter.run(ScriptedStop(h.clock, rounds=4, on_wait=script))
    assert component().ready is True


def test_a_bug_in_one_report_does_not_end_the_reporter() -> None:
    """An unexpected exception is counted as an error and the next report still runs."""
    h = Harness()
    h.api.failures = [RuntimeError("bug")]
    stop = ScriptedStop(h.clock, rounds=2)
    h.reporter.run(stop)
    assert h.reports("error") == 1 and h.reports("success") == 1
    assert stop.waits[1] == 60  # a bug waits a whole interval
