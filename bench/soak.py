"""Chaos soak: `python -m bench soak [--duration 900] [--seed 18] [--publish]`.

On the local control plane (bench._soakcluster: three agents in cluster mode, two
descheduler replicas with leader election, the scheduler extender behind
kube-scheduler, the soak playing kubelet and ReplicaSet controller) a seeded
schedule of faults runs while a monitor samples every second: API server
outages, an etcd restart, kill -9 of agents and of the descheduler leader, pod
churn, cordons, an agent stopped past nodeMetricExpirationSeconds, malformed
objects from "another tool", and a slow API server (latency proxy).

Results go to bench/results/local/soak.json (gitignored), or with --publish to
bench/results/soak.json; the exit status is 0 when every target is met.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from agent import kinds as agent_kinds
from bench import _soakcluster as sc
from kube import localcluster, rest
from metriccache import MetricCache, kinds

RESULTS = Path(__file__).resolve().parent / "results"
RUN_BY_DEFAULT = False  # 15 minutes: `python -m bench soak` or `make soak`


@dataclass(order=True)
class Fault:
    at: float
    kind: str = field(compare=False)
    seconds: float = field(default=0.0, compare=False)


def schedule(rng: random.Random, duration: float) -> list[Fault]:
    """The seeded fault list: each kind at least once, outages repeated in long runs."""
    warmup, tail = 45.0, 30.0
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
        Fault(0, "stop-agent", sc.EXPIRATION + 10),
    ]
    if long:
        faults += [Fault(0, "apiserver", rng.uniform(5, 60)) for _ in range(3)]
        faults += [Fault(0, k) for k in ("kill-agent", "kill-leader", "churn", "churn")]
    rng.shuffle(faults)
    span = max(1.0, duration - warmup - tail)
    for i, fault in enumerate(faults):  # spread evenly, jittered
        fault.at = warmup + span * (i + rng.random() * 0.5) / len(faults)
    return sorted(faults)


def retried(call: Any, attempts: int = 5) -> Any:
    """An admin call retried across a dropped keep-alive connection or a short outage."""
    for attempt in range(attempts):
        try:
            return call()
        except rest.ApiUnavailable:
            if attempt == attempts - 1:
                raise
            time.sleep(2)


class Soak:
    def __init__(self, cluster: sc.SoakCluster, rng: random.Random) -> None:
        self.c = cluster
        self.rng = rng
        self.t0 = time.monotonic()
        self.lock = threading.RLock()
        self.log: list[dict[str, Any]] = []
        self.kills: dict[str, list[float]] = {}  # agent -> wall times of kill -9
        self.leader_regain: list[float] = []
        self.republish: list[dict[str, Any]] = []
        self.pending_republish: dict[str, float] = {}
        self.stale_windows: list[tuple[str, float, float]] = []  # node, from, to (wall)
        self.malformed_nodes: set[str] = set()
        self.two_leader_ticks = 0
        self.evictions_without_lease = 0
        self.evictions_total = 0
        self.api_refusals: list[str] = []
        self._leader_lost_at: float | None = None
        self._main_calls: list[tuple[Any, threading.Event]] = []
        self._last: dict[str, dict[str, float]] = {}

    def note(self, text: str) -> None:
        with self.lock:
            self.log.append({"t": round(time.monotonic() - self.t0, 1), "event": text})
        print(f"[{time.monotonic() - self.t0:6.1f}s] {text}", flush=True)

    # -- faults ---------------------------------------------------------------------------

    def on_main(self, call: Any) -> None:
        """Run `call` on the monitor's thread and wait for it. Control-plane processes die
        with the thread that forked them (PR_SET_PDEATHSIG), so a fault thread must not
        be the one that restarts them."""
        done = threading.Event()
        with self.lock:
            self._main_calls.append((call, done))
        done.wait(300)

    def run_main_calls(self) -> None:
        with self.lock:
            calls, self._main_calls = self._main_calls, []
        for call, done in calls:
            try:
                call()
            finally:
                done.set()

    def run_fault(self, fault: Fault) -> None:
        c = self.c
        if fault.kind in ("apiserver", "etcd"):
            self.note(f"{fault.kind} killed for {fault.seconds:.0f}s")
            if fault.kind == "apiserver":
                c.plane.stop_apiserver()
                c.proxy.cut()
                time.sleep(fault.seconds)
                self.on_main(c.plane.start_apiserver)
            else:
                c.plane.stop_etcd()
                time.sleep(fault.seconds)
                self.on_main(c.plane.start_etcd)
                self._wait_api()
            back = time.time()
            with self.lock:
                self.pending_republish = {n: back for n in sc.NODES}
            self.note(f"{fault.kind} back")
        elif fault.kind == "kill-agent":
            node = self.rng.choice(sc.NODES)
            self.kills.setdefault(node, []).append(time.time())
            c.daemons[f"agent-{node}"].kill9()
            self.note(f"kill -9 agent of {node}")
            time.sleep(2)
            c.daemons[f"agent-{node}"].request_start()
        elif fault.kind == "kill-leader":
            deadline = time.monotonic() + 60  # right after an outage nobody may hold the lease
            while not (leaders := [r for r in ("a", "b") if self._leader(r)]):
                if time.monotonic() > deadline:
                    self.note("kill-leader: no leader to kill")
                    return
                time.sleep(1)
            with self.lock:
                self._leader_lost_at = time.monotonic()
            c.daemons[f"descheduler-{leaders[0]}"].kill9()
            self.note(f"kill -9 descheduler leader {leaders[0]}")
            time.sleep(3)
            c.daemons[f"descheduler-{leaders[0]}"].request_start()  # its Deployment would
        elif fault.kind == "churn":
            pods = c.admin.get(rest.object_path("", "v1", "pods", namespace=sc.NAMESPACE))
            web = [p for p in pods["items"] if p["metadata"].get("labels", {}).get("app") == "web"]
            if web:
                victim = self.rng.choice(web)["metadata"]["name"]
                c.admin.delete(rest.object_path("", "v1", "pods", victim, namespace=sc.NAMESPACE))
                self.note(f"deleted pod {victim}")
        elif fault.kind == "cordon":
            path = rest.object_path("", "v1", "nodes", "n3")
            retried(lambda: c.admin.patch(path, {"spec": {"unschedulable": True}}))
            self.note("cordoned n3")
            time.sleep(fault.seconds)
            retried(lambda: c.admin.patch(path, {"spec": {"unschedulable": False}}))
            self.note("uncordoned n3")
        elif fault.kind == "slow":
            c.proxy.delay = 0.3
            self.note(f"API latency +300 ms per chunk for {fault.seconds:.0f}s")
            time.sleep(fault.seconds)
            c.proxy.delay = 0.0
            self.note("API latency back to normal")
        elif fault.kind == "stop-agent":
            daemon = c.daemons["agent-n1"]
            daemon.stop()
            stopped = time.time()
            self.note(f"agent of n1 stopped for {fault.seconds:.0f}s (> expiration)")
            time.sleep(fault.seconds)
            daemon.request_start()
            with self.lock:
                self.stale_windows.append(("n1", stopped, time.time() + sc.REPORT_INTERVAL))
            self.note("agent of n1 started again")
        elif fault.kind == "malformed":
            self.write_malformed()

    def write_malformed(self) -> None:
        """Objects "another tool" wrote; the API server refuses what its schemas catch."""
        c = self.c
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
        self.malformed_nodes.add("ghost")
        for what, path, body in attempts:
            try:
                c.admin.create(path, body)
                self.note(f"wrote {what}")
            except rest.ApiError as err:
                self.api_refusals.append(f"{what}: {err.status} {err.reason}")
                self.note(f"API server refused {what} ({err.status})")
        huge = c.pod("huge-annotation", 50, node="n2")
        c.admin.patch(
            rest.object_path("", "v1", "pods", huge["metadata"]["name"], namespace=sc.NAMESPACE),
            {"metadata": {"annotations": {"soak.nodeqos.io/blob": "x" * 200_000}}},
        )
        self.note("pod with a 200 KB annotation on n2")

    def _wait_api(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.c.admin.get("/api/v1/namespaces/default")
                return
            except (rest.ApiError, rest.ApiUnavailable):
                time.sleep(0.5)

    # -- the monitor ---------------------------------------------------------------------------

    def _leader(self, replica: str) -> bool:
        return self._last.get(replica, {}).get("nodeqos_descheduler_leader", 0.0) == 1.0

    def tick(self, elapsed: float) -> None:
        c = self.c
        now = time.monotonic()
        for daemon in c.daemons.values():
            before = len(daemon.crashes)
            daemon.check(now)
            if len(daemon.crashes) > before:
                self.note(f"CRASH: {daemon.name} exited {daemon.crashes[-1]['exit']}; restarted")
        for replica in ("a", "b"):
            previous = self._last.get(replica, {})
            metrics = c.daemons[f"descheduler-{replica}"].metrics(c.ports[f"descheduler-{replica}"])
            evicted = sum(
                v for k, v in metrics.items()
                if k.startswith("nodeqos_descheduler_pods_evicted_total{") and 'result="success"' in k
            )  # fmt: skip
            metrics["evicted"] = evicted
            grew = evicted - previous.get("evicted", evicted)
            if grew > 0:
                self.evictions_total += int(grew)
                was = previous.get("nodeqos_descheduler_leader", 0.0) == 1.0
                if not was and metrics.get("nodeqos_descheduler_leader", 0.0) != 1.0:
                    self.evictions_without_lease += int(grew)
            self._last[replica] = metrics
        leaders = [r for r in ("a", "b") if self._leader(r)]
        if len(leaders) > 1:
            self.two_leader_ticks += 1
        with self.lock:
            if self._leader_lost_at is not None and leaders:
                self.leader_regain.append(round(now - self._leader_lost_at, 1))
                self.note(f"leader regained by {leaders[0]}")
                self._leader_lost_at = None
        try:
            c.kubelet_tick(elapsed)
            self._check_reports()
        except (rest.ApiError, rest.ApiUnavailable) as err:
            del err  # an outage in progress: the next tick catches up

    def _check_reports(self) -> None:
        items = self.c.admin.get(sc.NODEMETRICS)["items"]
        with self.lock:
            for item in items:
                node = item["metadata"]["name"]
                stamp = (item.get("status") or {}).get("updateTime")
                back = self.pending_republish.get(node)
                if back is None or not stamp:
                    continue
                updated = datetime.fromisoformat(stamp).timestamp()
                if updated >= int(back):
                    self.republish.append({"node": node, "seconds": round(updated - back, 1)})
                    del self.pending_republish[node]

    def run(self, duration: float, faults: list[Fault]) -> None:
        c = self.c
        for i, millicores in enumerate((250, 250, 250)):
            c.pod(f"web-hot-{i}", millicores, node="n1")
        for node in ("n2", "n3"):
            c.pod(f"web-{node}", 100, node=node)
        c.kubelet_tick(0.0)  # the pods run before the agents start, as on a real node
        c.start_daemons()
        self.note(f"cluster up; {len(faults)} faults scheduled")
        queue = list(faults)
        runner: threading.Thread | None = None
        last = time.monotonic()
        replicas = 0
        while time.monotonic() - self.t0 < duration:
            now = time.monotonic()
            self.run_main_calls()
            self.tick(now - last)
            last = now
            if queue and now - self.t0 >= queue[0].at and (runner is None or not runner.is_alive()):
                runner = threading.Thread(target=self._guarded, args=(queue.pop(0),), daemon=True)
                runner.start()
            replicas = self._replace_evicted(replicas)
            time.sleep(max(0.0, 1.0 - (time.monotonic() - now)))
        if runner is not None:
            runner.join(120)
        self.missed_faults = [f.kind for f in queue]

    def _guarded(self, fault: Fault) -> None:
        try:
            self.run_fault(fault)
        except (rest.ApiError, rest.ApiUnavailable, OSError) as err:
            self.note(f"fault {fault.kind} hit {err!r}")

    def _replace_evicted(self, made: int) -> int:
        """The ReplicaSet controller's part: keep five web pods, new ones scheduled."""
        try:
            pods = self.c.admin.get(rest.object_path("", "v1", "pods", namespace=sc.NAMESPACE))
        except (rest.ApiError, rest.ApiUnavailable):
            return made
        live = [
            p for p in pods["items"]
            if p["metadata"].get("labels", {}).get("app") == "web"
            and not p["metadata"].get("deletionTimestamp")
        ]  # fmt: skip
        for _ in range(5 - len(live)):
            made += 1
            try:
                self.c.pod(f"web-r{made}", 250)
            except (rest.ApiError, rest.ApiUnavailable):
                break
        return made

    # -- results -----------------------------------------------------------------------------

    def samples_lost(self) -> list[dict[str, Any]]:
        """For each agent kill: samples collected but never flushed (read back from its file)."""
        lost = []
        for node, times in self.kills.items():
            with MetricCache.open(
                self.c.cache_path(node), kinds=agent_kinds.registry(), clock=time.time
            ) as cache:
                for killed in times:
                    agg = cache.aggregate(kinds.NODE_CPU_USAGE, {}, killed - 120, killed)
                    last = agg.last_time if agg is not None else killed - 120
                    gap = int((killed - last) // sc.COLLECT_INTERVAL)
                    lost.append({"node": node, "samples": gap})
        return lost

    def stale_evictions(self) -> int:
        bad = 0
        for ev in self.c.evictions:
            if ev["node"] in self.malformed_nodes:
                bad += 1
            for node, start, end in self.stale_windows:
                if ev["node"] == node and start + sc.EXPIRATION < ev["at"] < end:
                    bad += 1
        return bad

    def memory_growth(self) -> dict[str, float]:
        """RSS growth of each daemon's current process from 30 s after its start to the end."""
        growth = {}
        for name, daemon in self.c.daemons.items():
            samples = [(t, rss) for t, rss in daemon.rss if t - daemon.started_at >= 30]
            if len(samples) >= 2 and samples[-1][0] - samples[0][0] >= 30:
                growth[name] = round(100 * (samples[-1][1] - samples[0][1]) / samples[0][1], 1)
        return growth


def _within(value: float | None, limit: float) -> bool:
    return value is not None and value <= limit


def evaluate(soak: Soak, duration: float, seed: int) -> dict[str, Any]:
    c = soak.c
    lost = soak.samples_lost()
    growth = soak.memory_growth()
    regain_limit = sc.LEASE + sc.RENEW
    numbers = {
        "crashes": sum(len(d.crashes) for d in c.daemons.values()),
        "restarts_needed": sum(d.restarts_needed for d in c.daemons.values()),
        "samples_lost_per_agent_kill_max": max((x["samples"] for x in lost), default=0),
        "evictions_on_stale_or_malformed_data": soak.stale_evictions(),
        "evictions_without_lease": soak.evictions_without_lease,
        "ticks_with_two_leaders": soak.two_leader_ticks,
        "leader_regain_seconds_max": max(soak.leader_regain, default=None),
        "republish_after_outage_seconds_max": max(
            (r["seconds"] for r in soak.republish), default=None
        ),
        "memory_growth_percent_max": max(growth.values(), default=None),
        "evictions_total": soak.evictions_total,
    }
    targets = {
        "crashes": 0,
        "restarts_needed": 0,
        "samples_lost_per_agent_kill_max": int(sc.FLUSH_INTERVAL / sc.COLLECT_INTERVAL),
        "evictions_on_stale_or_malformed_data": 0,
        "evictions_without_lease": 0,
        "ticks_with_two_leaders": 0,
        "leader_regain_seconds_max": regain_limit,
        "republish_after_outage_seconds_max": sc.REPORT_INTERVAL,
        "memory_growth_percent_max": 10.0,
    }
    met = {key: _within(numbers[key], limit) for key, limit in targets.items()}
    return {
        "duration_seconds": duration,
        "seed": seed,
        "mode": "real busy processes" if c.real else "fake cgroup tree (load generator)",
        "numbers": numbers,
        "targets": targets,
        "met": met,
        "details": {
            "samples_lost": lost,
            "leader_regain_seconds": soak.leader_regain,
            "republish_after_outage": soak.republish,
            "memory_growth_percent": growth,
            "evictions": c.evictions,
            "api_refusals": soak.api_refusals,
            "faults_not_reached": soak.missed_faults,
            "crashes": {n: d.crashes for n, d in c.daemons.items() if d.crashes},
        },
        "log": soak.log,
    }


def run(duration: float, seed: int, *, real: bool, workdir: Path | None = None) -> dict[str, Any]:
    """One soak; returns the results document (see `evaluate`)."""
    rng = random.Random(seed)
    faults = schedule(rng, duration)
    with tempfile.TemporaryDirectory(prefix="nodeqos-soak-") as tmp:
        cluster = sc.SoakCluster(workdir or Path(tmp), real=real)
        try:
            soak = Soak(cluster, rng)
            soak.run(duration, faults)
        finally:
            cluster.close()
        return evaluate(soak, duration, seed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench soak", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--duration", type=float, default=900.0, help="seconds (default 900)")
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--fake-load", action="store_true", help="never run real busy processes")
    parser.add_argument("--publish", action="store_true", help="write bench/results/soak.json")
    options = parser.parse_args(argv or [])
    results = run(options.duration, options.seed, real=not options.fake_load)
    out = RESULTS / "soak.json" if options.publish else RESULTS / "local" / "soak.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps({"numbers": results["numbers"], "met": results["met"]}, indent=2))
    print(f"results: {out}")
    return 0 if all(results["met"].values()) else 1
