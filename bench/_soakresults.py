"""The soak's record (what the faults and the monitor saw) and its results document:
every measure against its target. Used by `bench.soak` and `bench._soakfaults`."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from bench import _flushkill
from bench import _soakcluster as sc


@dataclass
class Record:
    """Shared by the fault threads and the monitor; `lock` guards the mutable parts."""

    t0: float = field(default_factory=time.monotonic)
    lock: threading.RLock = field(default_factory=threading.RLock)
    log: list[dict[str, Any]] = field(default_factory=list)
    kills: list[_flushkill.Kill] = field(default_factory=list)
    leaders: tuple[str, ...] = ()  # descheduler replicas saying they lead, last tick
    leader_lost_at: float | None = None  # monotonic time of the last leader kill
    leader_regain: list[float] = field(default_factory=list)
    pending_republish: dict[str, float] = field(default_factory=dict)  # node -> wall time back
    republish: list[dict[str, Any]] = field(default_factory=list)
    stopped: set[str] = field(default_factory=set)  # nodes whose agent is down on purpose
    stale_windows: list[tuple[str, float, float]] = field(default_factory=list)  # node, wall
    malformed_nodes: set[str] = field(default_factory=set)
    api_refusals: list[str] = field(default_factory=list)
    outages: list[tuple[float, float]] = field(default_factory=list)  # API server down, monotonic
    partition_takeover: list[float | None] = field(default_factory=list)  # s to a new leader
    two_leader_ticks: int = 0
    evictions_without_lease: int = 0
    evictions_total: int = 0
    faults_done: list[str] = field(default_factory=list)  # kinds, as each ran to its end
    missed_faults: list[str] = field(default_factory=list)  # kinds never started
    load: list[tuple[float, float, float]] = field(default_factory=list)  # one per tick

    def note(self, text: str) -> None:
        elapsed = time.monotonic() - self.t0
        with self.lock:
            self.log.append({"t": round(elapsed, 1), "event": text})
        print(f"[{elapsed:6.1f}s] {text}", flush=True)

    def sample_load(self) -> None:
        self.load.append(os.getloadavg())


def stale_evictions(record: Record, cluster: sc.SoakCluster) -> int:
    """Evictions from a node without an agent, or whose NodeMetric had expired."""
    bad = 0
    for ev in cluster.evictions:
        if ev["node"] in record.malformed_nodes:
            bad += 1
        for node, start, end in record.stale_windows:
            if ev["node"] == node and start + sc.EXPIRATION < ev["at"] < end:
                bad += 1
    return bad


def memory_growth(cluster: sc.SoakCluster) -> dict[str, float]:
    """RSS growth of each daemon's current process from 30 s after its start to the end."""
    growth = {}
    for name, daemon in cluster.daemons.items():
        samples = [(t, rss) for t, rss in daemon.rss if t - daemon.started_at >= 30]
        if len(samples) >= 2 and samples[-1][0] - samples[0][0] >= 30:
            growth[name] = round(100 * (samples[-1][1] - samples[0][1]) / samples[0][1], 1)
    return growth


def load_average(record: Record) -> dict[str, Any]:
    """The machine's load over the soak (2 cores shared with whatever else ran)."""
    if not record.load:
        return {}
    ones = [entry[0] for entry in record.load]
    return {
        "at_start": [round(x, 2) for x in record.load[0]],
        "at_end": [round(x, 2) for x in record.load[-1]],
        "mean_1m": round(sum(ones) / len(ones), 2),
        "max_1m": round(max(ones), 2),
    }


def slow_republish_logs(record: Record, cluster: sc.SoakCluster) -> dict[str, list[str]]:
    """For an agent that missed the republish target, what its reporter logged."""
    slow = {
        r["node"]
        for r in record.republish
        if r["seconds"] is None or r["seconds"] > sc.REPORT_INTERVAL
    }
    logs = {}
    for node in sorted(slow):
        text = cluster.daemons[f"agent-{node}"].log_path.read_text(errors="replace")
        logs[node] = [line[:300] for line in text.splitlines() if "agent.reporter" in line]
    return logs


def requests_during_outages(record: Record, cluster: sc.SoakCluster) -> dict[str, list[float]]:
    """Per client (proxy), its connection attempts per second in each API server outage:
    with the server stopped each request needs a new connection, refused at once, so
    this is how hard the client retries. Bounded retries keep it low."""
    rates: dict[str, list[float]] = {}
    for start, end in record.outages:
        for name, proxy in sorted(cluster.proxies.items()):
            if name != "admin":  # the soak itself
                per_second = proxy.accepts_between(start, end) / max(end - start, 1.0)
                rates.setdefault(name, []).append(round(per_second, 2))
    return rates


def _within(value: float | None, limit: float) -> bool:
    return value is not None and value <= limit


# A kill inside a flush loses the batch in flight, the rounds since the previous
# flush took its batch (one flush interval), plus a round that may land while the
# killed flush runs.
MAX_SAMPLES_LOST = round(sc.FLUSH_INTERVAL / sc.COLLECT_INTERVAL) + 1


def evaluate(record: Record, cluster: sc.SoakCluster, duration: float, seed: int) -> dict[str, Any]:
    """The results document: numbers, targets, which were met, the details behind them."""
    lost = [
        _flushkill.samples_lost(kill, cluster.cache_path(kill.node), sc.COLLECT_INTERVAL)
        for kill in record.kills
    ]
    growth = memory_growth(cluster)
    rates = requests_during_outages(record, cluster)
    numbers = {
        "crashes": sum(len(d.crashes) for d in cluster.daemons.values()),
        "restarts_needed": sum(d.restarts_needed for d in cluster.daemons.values()),
        "agent_kills_outside_a_flush": sum(not kill.in_flush for kill in record.kills),
        "samples_lost_per_agent_kill_max": max(
            (x["samples"] if x["samples"] is not None else 10**9 for x in lost), default=None
        ),
        "evictions_on_stale_or_malformed_data": stale_evictions(record, cluster),
        "evictions_without_lease": record.evictions_without_lease,
        "ticks_with_two_leaders": record.two_leader_ticks,
        "leader_regain_seconds_max": max(record.leader_regain, default=None),
        "partition_takeover_seconds_max": max(
            (x if x is not None else float("inf") for x in record.partition_takeover),
            default=None,
        ),
        "requests_per_second_during_outages_max": max(
            (x for values in rates.values() for x in values), default=None
        ),
        "republish_after_outage_seconds_max": max(
            (r["seconds"] if r["seconds"] is not None else float("inf") for r in record.republish),
            default=None,
        ),
        "memory_growth_percent_max": max(growth.values(), default=None),
        "evictions_total": record.evictions_total,
    }
    targets = {
        "crashes": 0,
        "restarts_needed": 0,
        "agent_kills_outside_a_flush": 0,
        "samples_lost_per_agent_kill_max": MAX_SAMPLES_LOST,
        "evictions_on_stale_or_malformed_data": 0,
        "evictions_without_lease": 0,
        "ticks_with_two_leaders": 0,
        "leader_regain_seconds_max": sc.LEASE + sc.RENEW,
        "partition_takeover_seconds_max": sc.LEASE + sc.RENEW,
        "republish_after_outage_seconds_max": sc.REPORT_INTERVAL,
        "memory_growth_percent_max": 10.0,
    }
    met = {key: _within(numbers[key], limit) for key, limit in targets.items()}
    return {
        "duration_seconds": duration,
        "seed": seed,
        "mode": "real busy processes" if cluster.real else "fake cgroup tree (load generator)",
        "intervals_seconds": {
            "collect": sc.COLLECT_INTERVAL,
            "metric_cache_flush": sc.FLUSH_INTERVAL,
            "report": sc.REPORT_INTERVAL,
            "lease": sc.LEASE,
            "renew_deadline": sc.RENEW,
        },
        "load_average": load_average(record),
        "numbers": numbers,
        "targets": targets,
        "met": met,
        "details": {
            "agent_kills": lost,
            "leader_regain_seconds": record.leader_regain,
            "partition_takeover_seconds": record.partition_takeover,
            "outage_seconds": [round(end - start, 1) for start, end in record.outages],
            "requests_per_second_during_outages": rates,
            "republish_after_outage": record.republish,
            "memory_growth_percent": growth,
            "evictions": cluster.evictions,
            "api_refusals": record.api_refusals,
            "faults_done": record.faults_done,
            "faults_not_reached": record.missed_faults,
            "crashes": {n: d.crashes for n, d in cluster.daemons.items() if d.crashes},
            "slow_republish_logs": slow_republish_logs(record, cluster),
        },
        "log": record.log,
    }
