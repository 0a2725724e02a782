"""A network partition between the leading descheduler and the API server: never two leaders.

Two real `nodeqos-descheduler` processes share one Lease, each reaching the real
API server through its own TCP proxy (tests/tcpproxy.py). The test feeds pods
that PodLifeTime evicts at once, so whoever leads acts every cycle, then
blackholes the leader's proxy (its connections hang: accepted, never answered)
while the follower's keeps working, and later heals it (issue #36, "Two leaders").

What each replica did is read from its own log, on the one clock both share:
`became leader` / `stopped leading` (the elector), `could not renew within`
(the step-down at the renew deadline) and `evicted pod` (an eviction the API
server accepted). The assertions: the old leader stops within renew_deadline of
the partition, its gauge reads 0, it evicts nothing after that; the follower
leads after lease_duration and evicts only then; no two leaderships (and so no
two replicas' evictions) overlap, before or after the heal.

Lease timings 3 s / 2 s / 0.5 s keep it at about 20 s.
"""

from __future__ import annotations

import datetime as dt
import pathlib
import re
import signal
import subprocess
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO

import pytest

from kube import rest
from testbed import controlplane, localcluster
from tests.descheduler.test_cli_once import descheduler_command
from tests.tcpproxy import Proxy
from tests.waiting import eventually

pytestmark = [pytest.mark.controlplane, pytest.mark.slow]

LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 3.0, 2.0, 0.5
SLACK = 0.5  # scheduling on a busy 2-core machine: a watchdog thread wakes late by this much
LABEL = "nodeqos-test"
SERVING = re.compile(r"serving /metrics and /healthz on (http://\S+)")
LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (\w+) ([\w.]+): (.*)$")


def config(namespace: str) -> str:
    return f"""\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
deschedulingInterval: 200ms
nodeSelector: {{matchLabels: {{{LABEL}: {namespace}}}}}
leaderElection:
  leaderElect: true
  leaseDuration: {LEASE_DURATION:g}s
  renewDeadline: {RENEW_DEADLINE:g}s
  retryPeriod: {RETRY_PERIOD:g}s
  resourceName: partition
  resourceNamespace: {namespace}
profiles:
- name: p
  plugins:
    deschedule:
      enabled: [{{name: PodLifeTime}}]
  pluginConfig:
  - name: PodLifeTime
    args:
      states: [Running]
      namespaces: {{include: [{namespace}]}}
"""


@dataclass(frozen=True, slots=True)
class Entry:
    at: float  # seconds since the epoch
    text: str


@dataclass
class Replica:
    name: str
    proxy: Proxy
    proc: subprocess.Popen[bytes]
    log_path: pathlib.Path
    log: IO[bytes]
    url: str = ""

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")

    def entries(self) -> list[Entry]:
        found = []
        for line in self.logs().splitlines():
            match = LINE.match(line)
            if match:
                when = dt.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                found.append(Entry(when, match.group(4)))
        return found

    def times(self, needle: str) -> list[float]:
        return [e.at for e in self.entries() if needle in e.text]

    def evictions(self) -> list[tuple[float, str]]:
        pattern = re.compile(r"^evicted pod (\S+) from node")
        return [(e.at, m.group(1)) for e in self.entries() if (m := pattern.match(e.text))]

    def serving(self) -> str:
        match = SERVING.search(self.logs())
        if match is None and self.proc.poll() is not None:
            raise AssertionError(f"descheduler {self.name} exited early:\n{self.logs()}")
        return match.group(1) if match else ""

    def gauge(self) -> float | None:
        with urllib.request.urlopen(self.url + "/metrics", timeout=5) as resp:
            body = resp.read().decode()
        for line in body.splitlines():
            if line.startswith("nodeqos_descheduler_leader "):
                return float(line.split()[1])
        return None


class PodFeeder:
    """Creates a Running pod every `every` seconds (at most `limit`), alternating two nodes."""

    def __init__(self, kube: rest.Rest, namespace: str, nodes: list[str]) -> None:
        self._kube = kube
        self._namespace = namespace
        self._nodes = nodes
        self._stop = threading.Event()
        self.created = 0
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._run, name="pod-feeder", daemon=True)

    def start(self, every: float = 0.25, limit: int = 400) -> None:
        self._every, self._limit = every, limit
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set() and self.created < self._limit:
            name = f"p{self.created:04d}"
            body = {
                "metadata": {
                    "name": name,
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "ReplicaSet",
                            "name": "rs",
                            "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, self._namespace)),
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "nodeName": self._nodes[self.created % len(self._nodes)],
                    "containers": [{"name": "c", "image": "busybox"}],
                },
            }
            try:
                created = self._kube.create(f"/api/v1/namespaces/{self._namespace}/pods", body)
                localcluster.mark_running(self._kube, created)
            except (rest.ApiError, rest.ApiUnavailable) as err:
                self.errors.append(str(err))
            self.created += 1
            self._stop.wait(self._every)


@pytest.fixture
def nodes(kube: rest.Rest, namespace: str) -> Iterator[list[str]]:
    names = [f"{namespace}-a", f"{namespace}-b"]
    for name in names:
        localcluster.register_node(kube, name, labels={LABEL: namespace})
    yield names
    for name in names:
        kube.delete(f"/api/v1/nodes/{name}")


@pytest.fixture
def start_replica(
    control_plane: controlplane.ControlPlane, namespace: str, tmp_path: pathlib.Path
) -> Iterator[Callable[[str], Replica]]:
    config_file = tmp_path / "config.yaml"
    config_file.write_text(config(namespace))
    started: list[Replica] = []

    def start(name: str) -> Replica:
        proxy = Proxy(("127.0.0.1", control_plane.secure_port))
        kubeconfig = proxy.kubeconfig(control_plane.kubeconfig, tmp_path / f"{name}.kubeconfig")
        log_path = tmp_path / f"{name}.log"
        log = log_path.open("wb")
        proc = subprocess.Popen(
            [
                *descheduler_command(),
                "--config",
                str(config_file),
                "--kubeconfig",
                str(kubeconfig),
                "--metrics-addr",
                "127.0.0.1:0",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        replica = Replica(name, proxy, proc, log_path, log)
        started.append(replica)
        replica.url = eventually(replica.serving, f"replica {name} to serve", 30)
        return replica

    try:
        yield start
    finally:
        for replica in started:
            replica.proxy.heal()
            if replica.proc.poll() is None:
                replica.proc.send_signal(signal.SIGTERM)
        for replica in started:
            try:
                replica.proc.wait(15)
            except subprocess.TimeoutExpired:
                replica.proc.kill()
                replica.proc.wait(10)
            replica.log.close()
            replica.proxy.close()


def test_a_partitioned_leader_stops_before_the_follower_starts(
    kube: rest.Rest,
    namespace: str,
    nodes: list[str],
    start_replica: Callable[[str], Replica],
) -> None:
    """Blackhole the leader's connection: it stops at renew_deadline, the follower leads after
    lease_duration, their evictions never overlap; healing brings no second leader."""
    start = start_replica
    feeder = PodFeeder(kube, namespace, nodes)
    old = start("old")
    eventually(lambda: old.times("became leader"), "the first replica to lead", 15)
    new = start("new")
    feeder.start()
    try:
        eventually(lambda: len(old.evictions()) >= 3, "the leader to evict", 30)
        eventually(lambda: new.gauge() == 0.0, "the follower to serve its gauge", 10)

        old.proxy.blackhole()
        cut = time.time()
        eventually(lambda: old.gauge() == 0.0, "the cut-off leader's gauge to read 0", 10)
        gauge_zero = time.time() - cut
        eventually(lambda: new.times("became leader"), "the follower to take over", 15)
        eventually(
            lambda: [t for t, _ in new.evictions() if t > cut], "the new leader to evict", 10
        )

        old.proxy.heal()
        healed = time.time()
        eventually(lambda: old.proxy.open_connections > 0, "the old leader to reconnect", 15)
        eventually(
            lambda: (
                time.time() > healed + LEASE_DURATION + 2 * RETRY_PERIOD
                and len([t for t, _ in new.evictions() if t > healed]) >= 3
            ),
            "evictions after the heal",
            20,
        )
        assert old.gauge() == 0.0
        assert new.gauge() == 1.0
    finally:
        feeder.stop()

    old_started = old.times("became leader")
    old_stopped = old.times("stopped leading")
    new_started = new.times("became leader")
    new_stopped = new.times("stopped leading")
    old_evicted, new_evicted = old.evictions(), new.evictions()
    report = (
        f"partition at {cut:.3f}; old leader: led {old_started}, stopped {old_stopped}; "
        f"new: led {new_started}, stopped {new_stopped}; old evicted {len(old_evicted)}, "
        f"new evicted {len(new_evicted)}\n--- old ---\n{old.logs()[-6000:]}"
    )

    # The old leader: one term, ended within renew_deadline of the cut, logged as such.
    assert len(old_started) == 1, report
    assert len(old_stopped) == 1, report
    step_down = old_stopped[0] - cut
    assert step_down <= RENEW_DEADLINE + SLACK, report
    assert "could not renew within 2.0s; stepping down" in old.logs()
    assert gauge_zero <= RENEW_DEADLINE + SLACK + 0.5, report  # + one /metrics round trip
    assert old_evicted, report
    assert max(t for t, _ in old_evicted) <= old_stopped[0], report

    # The new leader: took over only once the lease could have expired, and kept it.
    assert len(new_started) == 1, report
    assert new_stopped == [], report
    takeover = new_started[0] - cut
    assert takeover >= LEASE_DURATION - RETRY_PERIOD - 0.1, report
    assert takeover <= LEASE_DURATION + 2 * RETRY_PERIOD + SLACK + 1.0, report
    assert new_evicted, report
    assert min(t for t, _ in new_evicted) >= new_started[0], report

    # Never both: the terms do not overlap, and no pod was evicted by both.
    assert old_stopped[0] < new_started[0], report
    assert not {p for _, p in old_evicted} & {p for _, p in new_evicted}, report
    print(
        f"\npartition: step-down {step_down:.2f}s after the cut (gauge 0 seen at "
        f"{gauge_zero:.2f}s), takeover {takeover:.2f}s after it, no leader for "
        f"{new_started[0] - old_stopped[0]:.2f}s; evictions old {len(old_evicted)}, "
        f"new {len(new_evicted)}; proxy dropped {old.proxy.dropped_bytes} bytes"
    )
