"""Chaos soak: `python -m bench [--publish] soak [--duration 900] [--seed 18] [--fake-load]`.

On the local control plane (bench._soakcluster: three agents in cluster mode, two
descheduler replicas with leader election, the scheduler extender behind
kube-scheduler, the soak playing kubelet and ReplicaSet controller) a seeded
schedule of faults (bench._soakfaults) runs while the monitor here samples every
second: API server outages, an etcd restart, kill -9 of agents inside a
metric-cache flush (bench._flushkill) and of the descheduler leader, pod churn,
cordons, an agent stopped past nodeMetricExpirationSeconds, malformed objects
from "another tool", a slow API server (latency proxy), the API server stopped
for 60 s, and the descheduler leader partitioned (its proxy blackholed).

Results (bench._soakresults) go to bench/results/local/soak.json, or when
publishing (`python -m bench --publish soak`, or `--publish` here) to
bench/results/soak.json; the exit status is 0 when every target is met.
tests/test_soak.py runs the short variant, `run(SHORT, ...)`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import bench
from bench import _soakcluster as sc
from bench import _soakresults
from bench._soakfaults import LANES, Fault, Faults, schedule
from bench._soakresults import Record
from kube import rest

RUN_BY_DEFAULT = False  # 15 minutes: `python -m bench soak` or `make soak`
SHORT = 300.0  # seconds: the in-suite variant (tests/test_soak.py); it holds the 60 s outage
# Before the first fault the agents publish and the descheduler settles; after the
# last, every agent must have had a report interval to publish again.
WARMUP, TAIL = 30.0, sc.REPORT_INTERVAL + 5
OVERTIME = 180.0  # the most the soak waits past its duration for faults still running


class Monitor:
    """The soak's main thread: ticks every second, starts due faults, measures."""

    def __init__(self, cluster: sc.SoakCluster, record: Record, faults: Faults) -> None:
        self.c = cluster
        self.r = record
        self.faults = faults
        self._last: dict[str, dict[str, float]] = {}  # replica -> its last /metrics

    def tick(self, elapsed: float) -> None:
        c, r = self.c, self.r
        now = time.monotonic()
        r.sample_load()
        for daemon in c.daemons.values():
            before = len(daemon.crashes)
            daemon.check(now)
            if len(daemon.crashes) > before:
                r.note(f"CRASH: {daemon.name} exited {daemon.crashes[-1]['exit']}; restarted")
        for replica in ("a", "b"):
            self._count_evictions(replica)
        leaders = tuple(
            x for x in ("a", "b")
            if self._last.get(x, {}).get("nodeqos_descheduler_leader", 0.0) == 1.0
        )  # fmt: skip
        with r.lock:
            r.leaders = leaders
            if len(leaders) > 1:
                r.two_leader_ticks += 1
            if r.leader_lost_at is not None and leaders:
                r.leader_regain.append(round(now - r.leader_lost_at, 1))
                r.note(f"leader regained by {leaders[0]}")
                r.leader_lost_at = None
        try:
            c.kubelet_tick(elapsed)
            self._check_reports()
        except (rest.ApiError, rest.ApiUnavailable) as err:
            del err  # an outage in progress: the next tick catches up

    def _count_evictions(self, replica: str) -> None:
        """Evictions a replica made since the last tick; those made without the lease count."""
        c, r = self.c, self.r
        previous = self._last.get(replica, {})
        metrics = c.daemons[f"descheduler-{replica}"].metrics(c.ports[f"descheduler-{replica}"])
        evicted = sum(
            v for k, v in metrics.items()
            if k.startswith("nodeqos_descheduler_pods_evicted_total{") and 'result="success"' in k
        )  # fmt: skip
        metrics["evicted"] = evicted
        grew = evicted - previous.get("evicted", evicted)
        if grew > 0:
            r.evictions_total += int(grew)
            was = previous.get("nodeqos_descheduler_leader", 0.0) == 1.0
            if not was and metrics.get("nodeqos_descheduler_leader", 0.0) != 1.0:
                r.evictions_without_lease += int(grew)
        self._last[replica] = metrics

    def _check_reports(self) -> None:
        """After an outage: how long until each agent's NodeMetric is updated again."""
        items = self.c.admin.get(sc.NODEMETRICS)["items"]
        with self.r.lock:
            for item in items:
                node = item["metadata"]["name"]
                stamp = (item.get("status") or {}).get("updateTime")
                back = self.r.pending_republish.get(node)
                if back is None or not stamp:
                    continue
                updated = datetime.fromisoformat(stamp).timestamp()
                if updated >= int(back):
                    # updateTime has whole seconds, and is stamped when the report is
                    # built: a report built just before an etcd outage ended can be
                    # written just after. Either way it was published again at once.
                    seconds = max(0.0, round(updated - back, 1))
                    self.r.republish.append({"node": node, "seconds": seconds})
                    del self.r.pending_republish[node]

    def run(self, duration: float, queue: list[Fault]) -> None:
        """Tick until `duration` has passed and every started fault and every awaited
        republish is over (at most OVERTIME more); faults not started by `duration`
        are left out and reported."""
        c, r = self.c, self.r
        for i, millicores in enumerate((250, 250, 250)):
            c.pod(f"web-hot-{i}", millicores, node="n1")
        for node in ("n2", "n3"):
            c.pod(f"web-{node}", 100, node=node)
        c.kubelet_tick(0.0)  # the pods run before the agents start, as on a real node
        c.start_daemons()
        r.note(f"cluster up; {len(queue)} faults scheduled")
        runners: dict[str, threading.Thread] = {}
        last = time.monotonic()
        replicas = 0
        while True:
            now = time.monotonic()
            elapsed = now - r.t0
            busy = any(t.is_alive() for t in runners.values()) or self._awaiting_republish()
            if elapsed >= duration and (not busy or elapsed >= duration + OVERTIME):
                break
            self.faults.run_main_calls()
            self.tick(now - last)
            last = now
            for lane in LANES:
                due = [f for f in queue if f.lane == lane and f.at <= elapsed < duration]
                runner = runners.get(lane)
                if due and (runner is None or not runner.is_alive()):
                    queue.remove(due[0])
                    runners[lane] = threading.Thread(
                        target=self.faults.run, args=(due[0],), name=f"soak-{lane}", daemon=True
                    )
                    runners[lane].start()
            replicas = self._replace_evicted(replicas)
            time.sleep(max(0.0, 1.0 - (time.monotonic() - now)))
        r.missed_faults = [f.kind for f in queue]
        with r.lock:  # never published again: a miss, not a silence
            for node, back in r.pending_republish.items():
                if time.time() - back > sc.REPORT_INTERVAL:
                    r.republish.append({"node": node, "seconds": None})
                    r.note(f"{node} never published again after the outage")
            for runner in runners.values():
                if runner.is_alive():
                    r.note(f"{runner.name} still running at the end")

    def _awaiting_republish(self) -> bool:
        with self.r.lock:
            return any(
                time.time() - back <= sc.REPORT_INTERVAL + 5
                for back in self.r.pending_republish.values()
            )

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


def run(duration: float, seed: int, *, real: bool, workdir: Path | None = None) -> dict[str, Any]:
    """One soak; returns the results document (see `bench._soakresults.evaluate`)."""
    rng = random.Random(seed)
    faults = schedule(rng, duration, WARMUP, TAIL)
    with tempfile.TemporaryDirectory(prefix="nodeqos-soak-") as tmp:
        cluster = sc.SoakCluster(workdir or Path(tmp), real=real)
        record = Record()
        try:
            Monitor(cluster, record, Faults(cluster, record, rng)).run(duration, faults)
        finally:
            cluster.close()
        return _soakresults.evaluate(record, cluster, duration, seed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench soak", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--duration", type=float, default=900.0, help="seconds (default 900)")
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--fake-load", action="store_true", help="never run real busy processes")
    parser.add_argument("--publish", action="store_true", help="write bench/results/soak.json")
    options = parser.parse_args(argv or [])
    if options.publish:
        os.environ[bench.PUBLISH_ENV] = "1"
    results = run(options.duration, options.seed, real=not options.fake_load)
    out = bench.write_results("soak", results)
    print(json.dumps({"numbers": results["numbers"], "met": results["met"]}, indent=2))
    print(f"results: {out}")
    return 0 if all(results["met"].values()) else 1
