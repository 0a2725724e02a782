"""The soak's faults: the seeded schedule and what each fault does to the cluster.

Used by `bench.soak`, whose monitor starts each fault on a thread of its lane when
it is due. Faults of one lane run one after the other; the two lanes overlap, so
a short soak still reaches every fault: "main" holds the control-plane outages
(short ones, and "outage": the API server stopped OUTAGE seconds), the kills, the
partition of the descheduler leader (its proxy blackholed: connections accepted,
never answered, the follower's unharmed), the slow API server, churn and malformed
objects; "background" the long, quiet ones (an agent stopped past its NodeMetric's
expiration, a cordon).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench import _flushkill
from bench import _soakcluster as sc
from bench._soakresults import Record
from kube import rest
from testbed import localcluster

KINDS = frozenset(
    {
        "apiserver",
        "etcd",
        "kill-agent",
        "kill-leader",
        "churn",
        "cordon",
        "malformed",
        "outage",
        "partition",
        "slow",
        "stop-agent",
    }
)
BACKGROUND = frozenset({"stop-agent", "cordon"})
LANES = ("main", "background")
OUTAGE = 60.0  # seconds the API server is stopped by the "outage" fault (issue #36)
# The partition lasts past the lease (the follower must take over) and a few retries.
PARTITION = sc.LEASE + sc.RENEW + 6


@dataclass(order=True)
class Fault:
    at: float  # seconds after the soak's start
    kind: str = field(compare=False)
    seconds: float = field(default=0.0, compare=False)

    @property
    def lane(self) -> str:
        return "background" if self.kind in BACKGROUND else "main"


def schedule(rng: random.Random, duration: float, warmup: float, tail: float) -> list[Fault]:
    """The seeded fault list: each kind at least once, outages repeated in long runs,
    each lane's faults spread evenly (jittered) between the warm-up and the tail."""
    long = duration >= 600
    faults = [
        Fault(0, "apiserver", rng.uniform(5, 60) if long else rng.uniform(5, 10)),
        Fault(0, "kill-agent"),
        Fault(0, "kill-leader"),
        Fault(0, "churn"),
        Fault(0, "cordon", 10),
        Fault(0, "malformed"),
        Fault(0, "slow", 15),
        Fault(0, "etcd", rng.uniform(5, 10)),
        Fault(0, "outage", OUTAGE),
        Fault(0, "partition", PARTITION),
        Fault(0, "stop-agent", sc.EXPIRATION + 10),
    ]
    if long:
        faults += [Fault(0, "apiserver", rng.uniform(5, 60)) for _ in range(3)]
        faults += [Fault(0, k) for k in ("kill-agent", "kill-leader", "churn", "churn")]
    rng.shuffle(faults)
    span = max(1.0, duration - warmup - tail)
    for lane in LANES:
        mine = [fault for fault in faults if fault.lane == lane]
        for i, fault in enumerate(mine):
            fault.at = warmup + span * (i + rng.random() * 0.5) / len(mine)
    return sorted(faults)


def retried(call: Callable[[], Any], patience: float = 120.0) -> Any:
    """An admin call retried across a dropped keep-alive connection or an outage (the
    lanes overlap: a cordon may fall inside an API server outage)."""
    deadline = time.monotonic() + patience
    while True:
        try:
            return call()
        except rest.ApiUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(2)


class Faults:
    """Runs faults against `cluster`, noting what happened in `record`."""

    def __init__(self, cluster: sc.SoakCluster, record: Record, rng: random.Random) -> None:
        self.c = cluster
        self.r = record
        self.rng = rng
        self._main_calls: list[tuple[Callable[[], None], threading.Event]] = []

    def on_main(self, call: Callable[[], None]) -> None:
        """Run `call` on the monitor's thread and wait for it. Control-plane processes die
        with the thread that forked them (PR_SET_PDEATHSIG), so a fault thread must not
        be the one that restarts them."""
        done = threading.Event()
        with self.r.lock:
            self._main_calls.append((call, done))
        done.wait(300)

    def run_main_calls(self) -> None:
        """Called by the monitor's thread each tick."""
        with self.r.lock:
            calls, self._main_calls = self._main_calls, []
        for call, done in calls:
            try:
                call()
            finally:
                done.set()

    def run(self, fault: Fault) -> None:
        """Run one fault (on a lane's thread); API trouble is noted, not raised."""
        action = {
            "apiserver": self.outage,
            "outage": self.outage,
            "etcd": self.outage,
            "partition": self.partition,
            "kill-agent": self.kill_agent,
            "kill-leader": self.kill_leader,
            "churn": self.churn,
            "cordon": self.cordon,
            "slow": self.slow,
            "stop-agent": self.stop_agent,
            "malformed": self.malformed,
        }[fault.kind]
        try:
            action(fault)
            with self.r.lock:
                self.r.faults_done.append(fault.kind)
        except (rest.ApiError, rest.ApiUnavailable, OSError, _flushkill.NoFlush) as err:
            self.r.note(f"fault {fault.kind} hit {err!r}")

    def outage(self, fault: Fault) -> None:
        c, r = self.c, self.r
        what = "API server" if fault.kind == "outage" else fault.kind
        r.note(f"{what} killed for {fault.seconds:.0f}s ({fault.kind})")
        if fault.kind in ("apiserver", "outage"):
            c.plane.stop_apiserver()
            c.cut()
            start = time.monotonic()
            time.sleep(fault.seconds)
            with r.lock:  # the clients' connection attempts in it are counted at the end
                r.outages.append((start, time.monotonic()))
            self.on_main(c.plane.start_apiserver)
        else:
            c.plane.stop_etcd()
            time.sleep(fault.seconds)
            self.on_main(c.plane.start_etcd)
            self._wait_api()
        back = time.time()
        with r.lock:  # an agent stopped on purpose is measured when it starts, not here
            r.pending_republish = {n: back for n in sc.NODES if n not in r.stopped}
        r.note(f"{fault.kind} back")

    def _take_down(self, node: str) -> None:
        """Mark `node`'s agent as down on purpose (under the record's lock): an awaited
        republish after an outage is void, we are the reason it will not come."""
        self.r.stopped.add(node)
        if self.r.pending_republish.pop(node, None) is not None:
            self.r.note(f"republish of {node} after the outage not measured: agent taken down")

    def kill_agent(self, fault: Fault) -> None:
        """kill -9 of a running agent, inside a metric-cache flush (bench._flushkill)."""
        c, r = self.c, self.r
        with r.lock:
            node = self.rng.choice([n for n in sc.NODES if n not in r.stopped])
            self._take_down(node)
        daemon = c.daemons[f"agent-{node}"]
        try:
            kill = _flushkill.kill_in_flush(daemon, node, c.cache_path(node), sc.FLUSH_INTERVAL)
            with r.lock:
                r.kills.append(kill)
            where = "inside a flush" if kill.in_flush else "NOT inside a flush"
            r.note(f"kill -9 agent of {node} {where} (blocked {kill.flush_blocked_seconds}s)")
            time.sleep(2)
            daemon.request_start()
        finally:
            with r.lock:
                r.stopped.discard(node)

    def kill_leader(self, fault: Fault) -> None:
        c, r = self.c, self.r
        deadline = time.monotonic() + 60  # right after an outage nobody may hold the lease
        while not (leaders := r.leaders):
            if time.monotonic() > deadline:
                r.note("kill-leader: no leader to kill")
                return
            time.sleep(1)
        with r.lock:
            r.leader_lost_at = time.monotonic()
        c.daemons[f"descheduler-{leaders[0]}"].kill9()
        r.note(f"kill -9 descheduler leader {leaders[0]}")
        time.sleep(3)
        c.daemons[f"descheduler-{leaders[0]}"].request_start()  # its Deployment would
        # The fault lasts until a leader is back: the next fault of the lane (a slow API
        # server, say) must not stretch the measured regain.
        deadline = time.monotonic() + 60
        while r.leader_lost_at is not None and time.monotonic() < deadline:
            time.sleep(0.5)

    def partition(self, fault: Fault) -> None:
        """The descheduler leader cut off: its proxy blackholed for `fault.seconds`, then
        healed. The follower must lead once the lease runs out, never both at once (the
        monitor counts ticks with two leaders from both replicas' gauges)."""
        c, r = self.c, self.r
        deadline = time.monotonic() + 60
        while not (leaders := r.leaders):
            if time.monotonic() > deadline:
                r.note("partition: no leader to cut off")
                return
            time.sleep(1)
        old = leaders[0]
        proxy = c.proxies[f"descheduler-{old}"]
        proxy.blackhole()
        cut = time.monotonic()
        r.note(f"partition: descheduler {old} cut off for {fault.seconds:.0f}s")
        taken: float | None = None
        while time.monotonic() - cut < fault.seconds:
            if taken is None and r.leaders and r.leaders[0] != old:
                taken = round(time.monotonic() - cut, 1)
                r.note(f"partition: {r.leaders[0]} leads {taken}s after the cut")
            time.sleep(0.5)
        proxy.heal()
        with r.lock:
            r.partition_takeover.append(taken)
        r.note(f"partition of {old} healed")

    def churn(self, fault: Fault) -> None:
        c = self.c
        pods = c.admin.get(rest.object_path("", "v1", "pods", namespace=sc.NAMESPACE))
        web = [p for p in pods["items"] if p["metadata"].get("labels", {}).get("app") == "web"]
        if web:
            victim = self.rng.choice(web)["metadata"]["name"]
            c.admin.delete(rest.object_path("", "v1", "pods", victim, namespace=sc.NAMESPACE))
            self.r.note(f"deleted pod {victim}")

    def cordon(self, fault: Fault) -> None:
        path = rest.object_path("", "v1", "nodes", "n3")
        retried(lambda: self.c.admin.patch(path, {"spec": {"unschedulable": True}}))
        self.r.note("cordoned n3")
        time.sleep(fault.seconds)
        retried(lambda: self.c.admin.patch(path, {"spec": {"unschedulable": False}}))
        self.r.note("uncordoned n3")

    def slow(self, fault: Fault) -> None:
        # Not while agents are due to publish after an outage: their measured time
        # would be the slow server's, not their own recovery's.
        deadline = time.monotonic() + sc.REPORT_INTERVAL + 5
        while self.r.pending_republish and time.monotonic() < deadline:
            time.sleep(0.5)
        self.c.set_delay(0.3)
        self.r.note(f"API latency +300 ms per chunk for {fault.seconds:.0f}s")
        time.sleep(fault.seconds)
        self.c.set_delay(0.0)
        self.r.note("API latency back to normal")

    def stop_agent(self, fault: Fault) -> None:
        """n1's agent stopped past nodeMetricExpirationSeconds: n1 must not be used."""
        r = self.r
        deadline = time.monotonic() + 60
        while True:  # not while the other lane has n1's agent killed
            with r.lock:
                if "n1" not in r.stopped or time.monotonic() > deadline:
                    self._take_down("n1")
                    break
            time.sleep(0.5)
        try:
            daemon = self.c.daemons["agent-n1"]
            daemon.stop()
            stopped = time.time()
            r.note(f"agent of n1 stopped for {fault.seconds:.0f}s (> expiration)")
            time.sleep(fault.seconds)
            daemon.request_start()
            with r.lock:
                r.stale_windows.append(("n1", stopped, time.time() + sc.REPORT_INTERVAL))
            r.note("agent of n1 started again")
        finally:
            with r.lock:
                r.stopped.discard("n1")

    def malformed(self, fault: Fault) -> None:
        """Objects "another tool" wrote; the API server refuses what its schemas catch."""
        c, r = self.c, self.r
        attempts: list[tuple[str, str, dict[str, Any]]] = [
            (
                "NodeMetric with garbage quantities",
                sc.NODEMETRICS,
                {
                    "apiVersion": "slo.koordinator.sh/v1alpha1",
                    "kind": "NodeMetric",
                    "metadata": {"name": "ghost"},
                    "status": {
                        "updateTime": localcluster.now_rfc3339(),
                        "nodeMetric": {"nodeUsage": {"resources": {"cpu": "lots", "memory": "-"}}},
                    },
                },
            ),
            (
                "NodeSLO with wrong types",
                rest.object_path("slo.koordinator.sh", "v1alpha1", "nodeslos"),
                {
                    "apiVersion": "slo.koordinator.sh/v1alpha1",
                    "kind": "NodeSLO",
                    "metadata": {"name": "n2"},
                    "spec": {"resourceUsedThresholdWithBE": {"enable": "yes", "cpuSuppressThresholdPercent": "high"}},
                },
            ),
            (
                "PDB selecting nothing",
                rest.object_path("policy", "v1", "poddisruptionbudgets", namespace=sc.NAMESPACE),
                {"metadata": {"name": "nothing"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "none"}}}},
            ),
        ]  # fmt: skip
        localcluster.register_node(c.admin, "ghost", cpu=sc.NODE_CPU)
        r.malformed_nodes.add("ghost")
        for what, path, body in attempts:
            try:
                c.admin.create(path, body)
                r.note(f"wrote {what}")
            except rest.ApiError as err:
                r.api_refusals.append(f"{what}: {err.status} {err.reason}")
                r.note(f"API server refused {what} ({err.status})")
        huge = c.pod("huge-annotation", 50, node="n2")
        c.admin.patch(
            rest.object_path("", "v1", "pods", huge["metadata"]["name"], namespace=sc.NAMESPACE),
            {"metadata": {"annotations": {"soak.nodeqos.io/blob": "x" * 200_000}}},
        )
        r.note("pod with a 200 KB annotation on n2")

    def _wait_api(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.c.admin.get("/api/v1/namespaces/default")
                return
            except (rest.ApiError, rest.ApiUnavailable):
                time.sleep(0.5)
