"""A network partition between the leading manager and the API server: never two writers.

Two manager daemons (in this process, each with its own client) share one Lease,
each reaching the real API server through its own TCP proxy (tests/tcpproxy.py).
The test edits the slo-controller-config every 0.3 s, so whoever leads patches
the NodeSLO again and again; then it blackholes the leader's proxy while the
follower's keeps working, and later heals it (issue #36, "Two leaders": the
manager's gauge used to stay 1 for the whole 40 s watched).

Every request each daemon's client sends is recorded with its time; the
elector's `became leader` / `stopped leading` log records mark the terms. The
assertions: the old leader stops within renew_deadline of the cut, its gauge
reads 0, it sends no write after that; the follower leads after lease_duration
and writes only then; the terms never overlap, before or after the heal.
"""

from __future__ import annotations

import contextlib
import logging
import pathlib
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kube import rest
from manager import daemon
from testbed import controlplane, localcluster
from tests.builders import make_slo_config_data, strategy_doc
from tests.manager.test_reconcile_controlplane import CM_NAME, NODESLOS
from tests.tcpproxy import Proxy
from tests.waiting import eventually

pytestmark = [pytest.mark.controlplane, pytest.mark.slow]

LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 3.0, 2.0, 0.5
SLACK = 0.5  # scheduling on a busy 2-core machine


class Recording(rest.Rest):
    """The real client, recording every write it sends (a refused one is not sent)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list[tuple[float, str, str]] = []  # (time.time(), method, path)

    def _send(
        self,
        method: str,
        path: str,
        query: Mapping[str, str | int | bool] | None,
        body: Any,
        content_type: str,
        timeout: float,
        *,
        stream: bool,
    ) -> Any:
        at = time.time()
        try:
            return super()._send(method, path, query, body, content_type, timeout, stream=stream)
        except rest.WriteRefused:
            raise
        finally:
            if method != "GET" and "/leases/" not in path and "/events" not in path:
                self.sent.append((at, method, path))

    def writes(self) -> list[float]:
        return [at for at, _, _ in self.sent]


class Terms(logging.Handler):
    """The elector's `became leader` / `stopped leading` records, by identity."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.events: list[tuple[float, str, str]] = []  # (time, identity, "became"|"stopped")

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        for event, marker in (("became", " became leader"), ("stopped", " stopped leading")):
            if message.endswith(marker):
                identity = message[: -len(marker)].rsplit(" ", 1)[-1]
                self.events.append((record.created, identity, event))

    def of(self, identity: str, event: str) -> list[float]:
        return [t for t, who, what in self.events if who == identity and what == event]


@pytest.fixture
def terms() -> Iterator[Terms]:
    handler = Terms()
    logger = logging.getLogger("kube.leaderelection")
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


@pytest.fixture
def node(kube: rest.Rest) -> Iterator[tuple[str, str]]:
    tag = uuid.uuid4().hex[:8]
    name = f"mgrp-{tag}"
    localcluster.register_node(kube, name, labels={"nodeqos-test": tag})
    yield name, tag
    for path in (f"/api/v1/nodes/{name}", f"{NODESLOS}/{name}"):
        with contextlib.suppress(rest.ApiError):
            kube.delete(path)


class Replica:
    def __init__(
        self, plane: controlplane.ControlPlane, namespace: str, tag: str, tmp: pathlib.Path
    ) -> None:
        self.proxy = Proxy(("127.0.0.1", plane.secure_port))
        kubeconfig = self.proxy.kubeconfig(plane.kubeconfig, tmp / f"{uuid.uuid4().hex}.kubeconfig")
        self.client = Recording(rest.api_client(kubeconfig), qps=0, pool_size=daemon.POOL_SIZE)
        self.registry = CollectorRegistry()
        options = daemon.Options(
            config_namespace=namespace,
            metrics_addr="127.0.0.1:0",
            lease_namespace=namespace,
            lease_duration=LEASE_DURATION,
            renew_deadline=RENEW_DEADLINE,
            retry_period=RETRY_PERIOD,
            node_selector=f"nodeqos-test={tag}",
            manage_nodemetrics=False,
        )
        self.daemon = daemon.build(options, self.registry, client=self.client)
        assert self.daemon.elector is not None
        self.identity = self.daemon.elector.config.identity
        self.thread = threading.Thread(target=self.daemon.run, daemon=True)

    def gauge(self) -> float | None:
        return self.registry.get_sample_value("nodeqos_manager_leader")

    def close(self) -> None:
        self.proxy.heal()
        self.daemon.stop()
        self.thread.join(20)
        self.proxy.close()


class Editor:
    """Edits the ConfigMap's CPU suppress threshold every `every` seconds (bounded)."""

    def __init__(self, kube: rest.Rest, namespace: str) -> None:
        self._kube = kube
        self._path = f"/api/v1/namespaces/{namespace}/configmaps/{CM_NAME}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cm-editor", daemon=True)
        self.edits = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set() and self.edits < 300:
            doc = strategy_doc(
                {"enable": True, "cpuSuppressThresholdPercent": 40 + self.edits % 30}
            )
            with contextlib.suppress(rest.ApiError, rest.ApiUnavailable):
                current = self._kube.get(self._path)
                current["data"] = make_slo_config_data(resource_threshold_config=doc)
                self._kube.replace(self._path, current)
            self.edits += 1
            self._stop.wait(0.3)


def test_a_partitioned_manager_stops_writing_before_the_follower_starts(
    control_plane: controlplane.ControlPlane,
    kube: rest.Rest,
    namespace: str,
    node: tuple[str, str],
    terms: Terms,
    tmp_path: pathlib.Path,
) -> None:
    """Blackhole the leading manager: it stops at renew_deadline (gauge 0, no write sent after),
    the follower leads after lease_duration; the heal brings no second leader."""
    _, tag = node
    kube.create(
        f"/api/v1/namespaces/{namespace}/configmaps",
        {
            "metadata": {"name": CM_NAME},
            "data": make_slo_config_data(
                resource_threshold_config=strategy_doc(
                    {"enable": True, "cpuSuppressThresholdPercent": 60}
                )
            ),
        },
    )
    old = Replica(control_plane, namespace, tag, tmp_path)
    new: Replica | None = None
    editor = Editor(kube, namespace)
    try:
        old.thread.start()
        eventually(lambda: old.daemon.is_leader, "the first replica to lead", 15)
        new = Replica(control_plane, namespace, tag, tmp_path)
        new.thread.start()
        eventually(lambda: new is not None and new.gauge() == 0.0, "the follower to start", 10)
        eventually(
            lambda: new is not None and all(i.synced for i in new.daemon.reconciler.informers()),
            "the follower's caches",
            30,
        )
        editor.start()
        eventually(lambda: len(old.client.writes()) >= 3, "the leader to write", 30)

        old.proxy.blackhole()
        cut = time.time()
        eventually(lambda: old.gauge() == 0.0, "the cut-off leader's gauge to read 0", 10)
        gauge_zero = time.time() - cut
        eventually(lambda: terms.of(new.identity, "became"), "the follower to take over", 15)
        eventually(lambda: [t for t in new.client.writes() if t > cut], "the new leader to write")

        old.proxy.heal()
        healed = time.time()
        eventually(
            lambda: (
                time.time() > healed + LEASE_DURATION + 2 * RETRY_PERIOD
                and len([t for t in new.client.writes() if t > healed]) >= 3
            ),
            "writes after the heal",
            20,
        )
        assert old.gauge() == 0.0
        assert not old.daemon.is_leader
        assert new.gauge() == 1.0
    finally:
        editor.stop()
        for replica in (old, new):  # the follower first: the leader's release hands over to nobody
            if replica is not None:
                replica.close()

    old_became, old_stopped = terms.of(old.identity, "became"), terms.of(old.identity, "stopped")
    new_became, new_stopped = terms.of(new.identity, "became"), terms.of(new.identity, "stopped")
    old_writes, new_writes = old.client.writes(), new.client.writes()
    report = (
        f"cut at {cut:.3f}; old {old.identity}: led {old_became}, stopped {old_stopped}, "
        f"{len(old_writes)} writes, last {max(old_writes, default=0):.3f}; new {new.identity}: "
        f"led {new_became}, stopped {new_stopped}, {len(new_writes)} writes, first "
        f"{min(new_writes, default=0):.3f}"
    )
    # The old leader: one term until the shutdown's release, ended within renew_deadline.
    assert len(old_became) == 1, report
    step_down = old_stopped[0] - cut
    assert step_down <= RENEW_DEADLINE + SLACK, report
    assert gauge_zero <= RENEW_DEADLINE + SLACK, report
    assert max(old_writes) <= old_stopped[0], report
    # The new leader: only once the lease could have expired; it wrote only while leading.
    assert len(new_became) == 1, report
    takeover = new_became[0] - cut
    assert takeover >= LEASE_DURATION - RETRY_PERIOD - 0.1, report
    assert takeover <= LEASE_DURATION + 2 * RETRY_PERIOD + SLACK + 1.0, report
    assert min(new_writes) >= new_became[0], report
    assert old_stopped[0] < new_became[0], report
    print(
        f"\nmanager partition: step-down {step_down:.2f}s after the cut (gauge 0 seen at "
        f"{gauge_zero:.2f}s), takeover {takeover:.2f}s, no leader for "
        f"{new_became[0] - old_stopped[0]:.2f}s; writes old {len(old_writes)}, new "
        f"{len(new_writes)}"
    )
