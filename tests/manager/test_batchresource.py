"""The Batch resources controller: what it writes (pure `plan`) and, on the real API
server, the nodes/status patch of batch-cpu/batch-memory and the degradation to 0."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kube import events, objects, rest
from manager import batchresource
from manager.noderesource import ColocationStrategy, batch, mid
from manager.telemetry import Metrics
from testbed import localcluster
from tests.builders import make_node, make_nodemetric, make_nodemetric_dict

NOW = datetime(2026, 1, 1, tzinfo=UTC)
NODEMETRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
GI = 2**30
ENABLED = ColocationStrategy(enable=True)


def test_plan_patches_only_the_batch_and_mid_keys() -> None:
    """A node without batch resources gets a patch naming only batch-cpu/batch-memory and
    mid-cpu/mid-memory (0 here: no prodReclaimableMetric, midUnallocatedPercent 0)."""
    node = make_node("n1", cpu="4", memory="16Gi")
    metric = make_nodemetric("n1", system_cpu=500, node_memory=2 * GI, update_time=NOW)
    found = batchresource.plan(ENABLED, node, [], metric, None, NOW)
    memory = 16 * GI - int(16 * GI * 0.35) - 2 * GI
    assert found.wanted.batch == batch.BatchAllocatable(1900, memory)
    assert found.wanted.mid == mid.MidAllocatable(0, 0)
    values = {
        batch.BATCH_CPU: "1900",
        batch.BATCH_MEMORY: str(memory),
        mid.MID_CPU: "0",
        mid.MID_MEMORY: "0",
    }
    assert found.patch == {"status": {"capacity": values, "allocatable": values}}


def test_plan_skips_a_small_change_within_the_interval() -> None:
    """Within resourceDiffThreshold and updateTimeThresholdSeconds: no write."""
    memory = 16 * GI - int(16 * GI * 0.35) - 2 * GI
    extra = {batch.BATCH_CPU: "1850", batch.BATCH_MEMORY: str(memory)}
    extra |= {mid.MID_CPU: "0", mid.MID_MEMORY: "0"}
    node = make_node("n1", cpu="4", memory="16Gi", extra_allocatable=extra)
    metric = make_nodemetric("n1", system_cpu=500, node_memory=2 * GI, update_time=NOW)
    last = NOW - timedelta(seconds=10)
    assert batchresource.plan(ENABLED, node, [], metric, last, NOW).patch is None
    late = NOW - timedelta(seconds=301)
    assert batchresource.plan(ENABLED, node, [], metric, late, NOW).patch is not None


def test_plan_writes_when_only_mid_moved() -> None:
    """Batch unchanged but mid-cpu moved past resourceDiffThreshold: a write within the interval."""
    memory = 16 * GI - int(16 * GI * 0.35) - 2 * GI
    extra = {batch.BATCH_CPU: "1900", batch.BATCH_MEMORY: str(memory)}
    extra |= {mid.MID_CPU: "1000", mid.MID_MEMORY: "0"}
    node = make_node("n1", cpu="4", memory="16Gi", extra_allocatable=extra)
    metric = make_nodemetric("n1", system_cpu=500, node_memory=2 * GI, update_time=NOW)
    last = NOW - timedelta(seconds=10)
    found = batchresource.plan(ENABLED, node, [], metric, last, NOW)
    assert found.patch is not None
    assert found.patch["status"]["allocatable"][mid.MID_CPU] == "0"


def test_plan_degrades_a_stale_nodemetric_to_zero() -> None:
    """A NodeMetric older than degradeTimeMinutes: both resources 0, with the reason."""
    node = make_node("n1", cpu="4", memory="16Gi")
    metric = make_nodemetric("n1", update_time=NOW - timedelta(minutes=16))
    found = batchresource.plan(ENABLED, node, [], metric, None, NOW)
    assert found.wanted.as_resources() == dict.fromkeys(found.wanted.as_resources(), 0)
    assert len(found.wanted.as_resources()) == 4
    assert found.wanted.degraded is not None
    assert found.patch is not None
    assert found.patch["status"]["allocatable"][batch.BATCH_CPU] == "0"


# -- against the real API server --------------------------------------------------


def eventually(check: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    """Poll `check` until it returns something truthy; that value, or AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.05)


class Clock:
    """A settable wall clock for the controller."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def running(kube: rest.Rest, namespace: str) -> Iterator[tuple[Any, ...]]:
    """A controller over one fresh node, its loop running as leader."""
    tag = uuid.uuid4().hex[:8]
    name = f"batch-{tag}"
    localcluster.register_node(kube, name, cpu="4", memory="16Gi", labels={"nodeqos-test": tag})
    kube.create(
        f"/api/v1/namespaces/{namespace}/configmaps",
        {
            "metadata": {"name": "slo-controller-config"},
            "data": {"colocation-config": json.dumps({"enable": True})},
        },
    )
    clock = Clock(datetime.now(UTC).replace(microsecond=0))
    registry = CollectorRegistry()
    controller = batchresource.BatchController(
        kube,
        Metrics(registry),
        events.Recorder(kube, "nodeqos-manager"),
        namespace=namespace,
        name="slo-controller-config",
        node_selector=f"nodeqos-test={tag}",
        clock=clock,
    )
    stop = threading.Event()
    controller.start()
    loop = threading.Thread(target=controller.run, args=(stop, lambda: True), daemon=True)
    loop.start()
    try:
        yield kube, controller, name, clock, registry
    finally:
        stop.set()
        loop.join(10)
        controller.stop()
        for path in (f"/api/v1/nodes/{name}", f"{NODEMETRICS}/{name}"):
            with contextlib.suppress(rest.ApiError, rest.ApiUnavailable):
                kube.delete(path)


def _put_metric(
    kube: rest.Rest,
    name: str,
    updated: datetime,
    system_cpu: int = 500,
    reclaimable: dict[str, str] | None = None,
) -> str:
    """Create or update the node's NodeMetric; the resourceVersion written."""
    body = make_nodemetric_dict(
        name, system_cpu=system_cpu, node_memory=2 * GI, update_time=updated
    )
    if reclaimable is not None:
        body["status"]["prodReclaimableMetric"] = {"resource": {"resources": reclaimable}}
    try:
        current = kube.get(f"{NODEMETRICS}/{name}")
    except rest.ApiError:
        current = kube.create(NODEMETRICS, {k: v for k, v in body.items() if k != "status"})
    written = kube.replace(f"{NODEMETRICS}/{name}/status", {**current, "status": body["status"]})
    return str(written["metadata"]["resourceVersion"])


@pytest.mark.controlplane
def test_controller_patches_batch_resources_and_keeps_kubelet_fields(
    running: tuple[Any, ...],
) -> None:
    """A fresh NodeMetric: batch-cpu/-memory appear in capacity and allocatable, cpu and
    conditions stay; a stale one sets both to 0 with an Event and the degraded gauge."""
    kube, controller, name, clock, registry = running
    before = kube.get(f"/api/v1/nodes/{name}")
    _put_metric(kube, name, clock.now)

    def batch_cpu() -> str | None:
        status = kube.get(f"/api/v1/nodes/{name}")["status"]
        found = status.get("allocatable", {}).get(batch.BATCH_CPU)
        return None if found is None else str(found)

    eventually(lambda: batch_cpu() == "1900", "batch-cpu 1900 on the node")
    after = kube.get(f"/api/v1/nodes/{name}")
    assert after["status"]["capacity"][batch.BATCH_CPU] == "1900"
    assert after["status"]["allocatable"]["cpu"] == before["status"]["allocatable"]["cpu"]
    assert after["status"]["conditions"] == before["status"]["conditions"]
    memory = 16 * GI - int(16 * GI * 0.35) - 2 * GI
    assert after["status"]["allocatable"][batch.BATCH_MEMORY] == str(memory)
    assert registry.get_sample_value(
        "nodeqos_manager_node_batch_allocatable",
        {"node": name, "resource": batch.BATCH_CPU},
    ) == pytest.approx(1.9)

    clock.now += timedelta(minutes=16)
    controller.mark_all()
    eventually(lambda: batch_cpu() == "0", "batch-cpu degraded to 0")
    assert registry.get_sample_value("nodeqos_manager_batch_degraded_nodes") == 1
    selector = f"involvedObject.name={name},reason={batchresource.DEGRADED_REASON}"

    def degraded_event() -> bool:
        found = kube.get("/api/v1/events", fieldSelector=selector)
        return bool(found["items"])

    eventually(degraded_event, "the BatchResourceDegraded event")
    assert objects.Node.from_api(kube.get(f"/api/v1/nodes/{name}")).allocatable["cpu"] == 4000


@pytest.mark.controlplane
def test_controller_patches_mid_resources_beside_batch(running: tuple[Any, ...]) -> None:
    """A NodeMetric with prodReclaimableMetric: mid-cpu/mid-memory appear in capacity and
    allocatable beside batch-cpu, as min(reclaimable, unused); a stale one sets them to 0."""
    kube, controller, name, clock, registry = running
    _put_metric(kube, name, clock.now, reclaimable={"cpu": "1200m", "memory": "3Gi"})

    def status_of(key: str) -> str | None:
        found = kube.get(f"/api/v1/nodes/{name}")["status"].get("allocatable", {}).get(key)
        return None if found is None else str(found)

    eventually(lambda: status_of(mid.MID_CPU) == "1200", "mid-cpu 1200 on the node")
    after = kube.get(f"/api/v1/nodes/{name}")["status"]
    assert after["capacity"][mid.MID_CPU] == "1200"
    assert after["allocatable"][mid.MID_MEMORY] == str(3 * GI)
    assert after["allocatable"][batch.BATCH_CPU] == "1900"

    def gauge(resource: str) -> float | None:
        labels = {"node": name, "resource": resource}
        return registry.get_sample_value("nodeqos_manager_node_batch_allocatable", labels)

    # one gauge for both tiers, the resource names as label values
    assert (gauge(mid.MID_CPU), gauge(mid.MID_MEMORY)) == (pytest.approx(1.2), 3 * GI)
    assert gauge(batch.BATCH_CPU) == pytest.approx(1.9)

    clock.now += timedelta(minutes=16)
    controller.mark_all()
    eventually(lambda: status_of(mid.MID_CPU) == "0", "mid-cpu degraded to 0")
    assert status_of(mid.MID_MEMORY) == "0"
    assert (gauge(mid.MID_CPU), gauge(mid.MID_MEMORY)) == (0, 0)


@pytest.mark.controlplane
def test_controller_amplifies_batch_and_mid_cpu_by_the_normalization_ratio(
    running: tuple[Any, ...],
) -> None:
    """Annotating the Node with cpu-normalization-ratio 1.5 rewrites batch-cpu and mid-cpu x1.5
    (the annotation change alone wakes the controller); memory stays."""
    kube, _controller, name, clock, _registry = running
    _put_metric(kube, name, clock.now, reclaimable={"cpu": "1200m", "memory": "3Gi"})

    def allocatable() -> dict[str, Any]:
        found: dict[str, Any] = kube.get(f"/api/v1/nodes/{name}")["status"]["allocatable"]
        return found

    eventually(lambda: allocatable().get(mid.MID_CPU) == "1200", "mid-cpu 1200 on the node")
    memory = allocatable()[batch.BATCH_MEMORY]
    ratio = {"node.koordinator.sh/cpu-normalization-ratio": "1.50"}
    kube.patch(f"/api/v1/nodes/{name}", {"metadata": {"annotations": ratio}})
    eventually(lambda: allocatable().get(batch.BATCH_CPU) == "2850", "batch-cpu 1900 x 1.5")
    found = allocatable()
    assert (found[mid.MID_CPU], found[batch.BATCH_MEMORY]) == ("1800", memory)
    assert found[mid.MID_MEMORY] == str(3 * GI)


class GatedRest(rest.Rest):
    """The real client, whose Node status patches wait at a gate and are recorded."""

    def __init__(self, kube: rest.Rest) -> None:
        super().__init__(kube.client, qps=0, pool_size=20)
        self.gate = threading.Event()
        self.lock = threading.Lock()
        self.in_flight: dict[str, int] = {}
        self.most_in_flight = 0
        self.sent: list[tuple[str, str]] = []  # (path, batch-cpu) in the order sent

    def patch(self, path: str, body: Any, content_type: str = rest.MERGE_PATCH) -> Any:
        if not path.startswith("/api/v1/nodes/"):
            return super().patch(path, body, content_type)
        with self.lock:
            self.in_flight[path] = self.in_flight.get(path, 0) + 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight[path])
            self.sent.append((path, body["status"]["allocatable"][batch.BATCH_CPU]))
        try:
            assert self.gate.wait(30), "the test never opened the gate"
            return super().patch(path, body, content_type)
        finally:
            with self.lock:
                self.in_flight[path] -= 1


@pytest.mark.controlplane
def test_one_patch_per_node_in_flight_and_the_latest_state_wins(
    kube: rest.Rest, namespace: str
) -> None:
    """While a node's patch hangs (batch 0: no NodeMetric yet), three NodeMetric updates
    start no second patch of it; once it returns, one patch carries the last update."""
    tag = uuid.uuid4().hex[:8]
    name = f"batchq-{tag}"
    localcluster.register_node(kube, name, cpu="4", memory="16Gi", labels={"nodeqos-test": tag})
    kube.create(
        f"/api/v1/namespaces/{namespace}/configmaps",
        {
            "metadata": {"name": "slo-controller-config"},
            "data": {"colocation-config": json.dumps({"enable": True})},
        },
    )
    gated = GatedRest(kube)
    controller = batchresource.BatchController(
        gated,
        Metrics(CollectorRegistry()),
        None,
        namespace=namespace,
        name="slo-controller-config",
        node_selector=f"nodeqos-test={tag}",
        workers=6,
    )
    stop = threading.Event()
    controller.start()
    loop = threading.Thread(target=controller.run, args=(stop, lambda: True), daemon=True)
    loop.start()
    path = f"/api/v1/nodes/{name}/status"
    try:
        eventually(lambda: gated.in_flight.get(path) == 1, "the first patch to hang")
        now = datetime.now(UTC).replace(microsecond=0)
        _put_metric(kube, name, now, system_cpu=500)
        _put_metric(kube, name, now, system_cpu=1000)
        last = _put_metric(kube, name, now, system_cpu=1500)

        def seen_last() -> bool:
            metric = controller.nodemetrics.get(name)
            return metric is not None and metric.metadata.resource_version == last

        eventually(seen_last, "the controller to see the last NodeMetric update")
        controller.mark_all()  # a resync as well: still no second patch while one hangs
        assert gated.sent == [(path, "0")]
        gated.gate.set()

        def batch_cpu() -> str | None:
            found = kube.get(f"/api/v1/nodes/{name}")["status"]["allocatable"]
            return found.get(batch.BATCH_CPU)  # type: ignore[no-any-return]

        eventually(lambda: batch_cpu() == "900", "batch-cpu of the last update (900)")
        # The last state only: 1900 and 1400 are never sent. A second 900 may follow when
        # the Node watch delivers our own "0" after the 900 patch went (the cache lags
        # our writes); it is the same value, never an older one.
        assert gated.sent[0] == (path, "0")
        assert gated.sent[1:] in ([(path, "900")], [(path, "900")] * 2)
        assert gated.most_in_flight == 1
    finally:
        gated.gate.set()
        stop.set()
        loop.join(10)
        controller.stop()
        for obj in (f"/api/v1/nodes/{name}", f"{NODEMETRICS}/{name}"):
            with contextlib.suppress(rest.ApiError, rest.ApiUnavailable):
                kube.delete(obj)
