"""nodeqos-descheduler side by side with the upstream descheduler, same cluster, same run.

Run with `python -m bench peers`; writes peers.json (see bench/__init__.py).
Two profiles (`--profile`, `--help`): `requests`, described below, and `usage`,
LowNodeUtilization on metrics-server usage (bench/_peersusage.py, its own
cluster and control plane, recorded under `usage_profile`).
`python -m bench peers --small` runs the requests profile at 1,000 nodes only;
`python -m bench.peers --compare-logs bench/results/local nodes_1000_pods_30000`
compares the decisions in the logs a run left there.

The upstream binary is kubernetes-sigs/descheduler at the version pinned in
hack/peers/go.mod, built on demand by hack/build-peers.sh (cached under
~/.cache/nodeqos/peers/). The cluster is the LowNodeLoad benchmark's seeded
synthetic one (bench/lownodeload.py), created through REST in one local
control plane: 1,000 nodes / 30,000 pods, then grown to 5,000 / 150,000. Every
TAINT_EVERY-th node is tainted NoSchedule, which no pod tolerates, so
RemovePodsViolatingNodeTaints has work.

Both descheduler processes read the same DeschedulerPolicy (POLICY: one
profile, LowNodeUtilization on cpu requests with thresholds between the two
request levels the generator produces, RemoveDuplicates,
RemovePodsViolatingNodeTaints, PodLifeTime over one namespace, DefaultEvictor
with nodeFit off, the eviction caps lifted), run in dry-run mode one after the other, and are stopped after
1 + STEADY_CYCLES cycles. From each process's log, read as it is written:

- first cycle: process start to the end of the first cycle (start-up, the
  initial LIST/sync of every cache, one cycle);
- steady cycle: the time between two consecutive cycle ends (the interval is
  10 ms), median of STEADY_CYCLES;
- peak RSS: the kernel's high-water mark (VmHWM) when the process is stopped;
- CPU seconds (user + system) at the end of the first cycle, and per steady cycle;
- decisions: the pods each would evict in its last (steady) cycle, per plugin
  (upstream logs "Evicted pod in dry run mode" at -v=1; nodeqos logs
  "[dry-run] evicted pod"). The first cycle's counts are recorded too: upstream's
  dry run starts its first cycle before its sandbox mirrors every pod, so its
  first cycle decides over part of the cluster.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import dataclasses
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import psutil

from bench import lownodeload, previous_results, write_results
from kube import rest
from testbed import controlplane

REPO = Path(__file__).resolve().parent.parent
STEADY_CYCLES = 5
INTERVAL = "10ms"
RUN_TIMEOUT_SECONDS = 900.0
TAINT_EVERY = 50
TAINT = {"key": "bench.nodeqos.dev/peers", "value": "tainted", "effect": "NoSchedule"}
PROFILE = "peers"
MIB = 1 << 20

# Pod CPU requests cycle through 100m/250m/500m/1 (bench/lownodeload.py), so a
# 32-CPU node requests either 13.3 (41.6%) or 14.45 CPUs (45.2%) before the
# deschedule plugins; PodLifeTime then takes one or two pods off every node
# (team-00's): untainted nodes then request 40.0, 40.9, 42.0 or 44.8%, and
# thresholds of 41/43 make about half of them underutilized and 30% over, so
# LowNodeUtilization has work.
POLICY: dict[str, Any] = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "DeschedulerPolicy",
    # Upstream sets no caps by default, nodeqos does (5 per node, 20 in all):
    # lifted in both, so every decision is compared.
    "maxNoOfPodsToEvictPerNode": 1_000_000,
    "maxNoOfPodsToEvictPerNamespace": 1_000_000,
    "maxNoOfPodsToEvictTotal": 1_000_000,
    "profiles": [
        {
            "name": PROFILE,
            "pluginConfig": [
                {"name": "DefaultEvictor", "args": {"nodeFit": False}},
                {
                    "name": "LowNodeUtilization",
                    "args": {"thresholds": {"cpu": 41}, "targetThresholds": {"cpu": 43}},
                },
                {"name": "RemoveDuplicates", "args": {}},
                {"name": "RemovePodsViolatingNodeTaints", "args": {}},
                {
                    "name": "PodLifeTime",
                    "args": {"maxPodLifeTimeSeconds": 1, "namespaces": {"include": ["team-00"]}},
                },
            ],
            "plugins": {
                "deschedule": {"enabled": ["RemovePodsViolatingNodeTaints", "PodLifeTime"]},
                "balance": {"enabled": ["RemoveDuplicates", "LowNodeUtilization"]},
            },
        }
    ],
}
PLUGINS = ("RemovePodsViolatingNodeTaints", "PodLifeTime", "RemoveDuplicates", "LowNodeUtilization")
DETERMINISTIC = ("RemovePodsViolatingNodeTaints", "PodLifeTime")


# -- reading the logs ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Eviction:
    plugin: str
    pod: str  # namespace/name
    node: str


@dataclasses.dataclass(frozen=True, slots=True)
class CycleEnd:
    pass


# klog's structured line: I1125 09:00:00.000000 1 evictions.go:587] "Evicted pod in
# dry run mode" pod="ns/name" reason="..." strategy="PodLifeTime" node="n" profile="p"
_UPSTREAM_EVICTION = re.compile(
    r'"Evicted pod in dry run mode" pod="(?P<pod>[^"]+)".*? strategy="(?P<plugin>[^"]+)"'
    r' node="(?P<node>[^"]*)"'
)
_UPSTREAM_CYCLE_END = '"Number of evictions/requests"'
_NODEQOS_EVICTION = re.compile(
    r"\[dry-run\] evicted pod (?P<pod>\S+) from node (?P<node>\S+) \(plugin (?P<plugin>[^,]+), "
)
_NODEQOS_CYCLE_END = re.compile(r"\[dry-run\] cycle done in [\d.]+s")


def parse_upstream(line: str) -> Eviction | CycleEnd | None:
    """An event in a line of the upstream descheduler's log (-v=1), or None."""
    if match := _UPSTREAM_EVICTION.search(line):
        return Eviction(match["plugin"], match["pod"], match["node"])
    if _UPSTREAM_CYCLE_END in line:
        return CycleEnd()
    return None


def parse_nodeqos(line: str) -> Eviction | CycleEnd | None:
    """An event in a line of nodeqos-descheduler's log, or None."""
    if match := _NODEQOS_EVICTION.search(line):
        return Eviction(match["plugin"], match["pod"], match["node"])
    if _NODEQOS_CYCLE_END.search(line):
        return CycleEnd()
    return None


Decisions = dict[str, dict[str, str]]  # plugin -> {pod: node}


def compare(
    nodeqos: Decisions,
    upstream: Decisions,
    examples: int = 5,
    plugins: Iterable[str] = PLUGINS,
) -> dict[str, Any]:
    """Per plugin: how many each would evict, the pods only one of them picks, and
    whether they take as many pods from every node (the same choice up to ties)."""
    out: dict[str, Any] = {}
    for plugin in sorted(set(nodeqos) | set(upstream) | set(plugins)):
        our_pods, their_pods = nodeqos.get(plugin, {}), upstream.get(plugin, {})
        ours, theirs = set(our_pods), set(their_pods)
        out[plugin] = {
            "nodeqos": len(ours),
            "upstream": len(theirs),
            "both": len(ours & theirs),
            "only_nodeqos": len(ours - theirs),
            "only_upstream": len(theirs - ours),
            "only_nodeqos_examples": sorted(ours - theirs)[:examples],
            "only_upstream_examples": sorted(theirs - ours)[:examples],
            "same": ours == theirs,
            "same_count_per_node": collections.Counter(our_pods.values())
            == collections.Counter(their_pods.values()),
            "same_source_nodes": set(our_pods.values()) == set(their_pods.values()),
        }
    return out


def cycles_in_log(path: Path, parse: Any) -> list[Decisions]:
    """The decisions of every complete cycle in a saved log, in order."""
    cycles: list[Decisions] = []
    current: Decisions = {}
    with path.open() as log:
        for line in log:
            event = parse(line)
            if isinstance(event, Eviction):
                current.setdefault(event.plugin, {})[event.pod] = event.node
            elif isinstance(event, CycleEnd):
                cycles.append(current)
                current = {}
    return cycles


def compare_logs(directory: Path, label: str) -> dict[str, Any]:
    """Re-read the logs a run saved (bench/results/local/peers-*-LABEL.log), compare the last cycles."""
    ours = cycles_in_log(directory / f"peers-nodeqos-{label}.log", parse_nodeqos)
    theirs = cycles_in_log(directory / f"peers-upstream-{label}.log", parse_upstream)
    return compare(ours[-1], theirs[-1])


# -- running one descheduler -----------------------------------------------------------


@dataclasses.dataclass
class Measured:
    first_cycle_seconds: float
    cycle_ends: list[float]
    cpu_at_ends: list[float]
    peak_rss_bytes: int
    cycles: list[Decisions]  # every cycle's; the last is a steady one

    @property
    def first_decisions(self) -> Decisions:
        return self.cycles[0]

    @property
    def decisions(self) -> Decisions:
        return self.cycles[-1]

    @property
    def first_complete(self) -> int:
        """Index of the first cycle that saw the whole cluster.

        Judged by the plugins whose choice does not depend on tie order
        (DETERMINISTIC): upstream breaks LowNodeUtilization's ties differently
        every cycle, so its balance decisions never settle.
        """

        def settled(cycle: Decisions) -> dict[str, dict[str, str]]:
            return {p: cycle.get(p, {}) for p in DETERMINISTIC}

        last = settled(self.cycles[-1])
        return next(i for i, cycle in enumerate(self.cycles) if settled(cycle) == last)

    def summary(self) -> dict[str, Any]:
        gaps = [b - a for a, b in zip(self.cycle_ends, self.cycle_ends[1:], strict=False)]
        cpu = [b - a for a, b in zip(self.cpu_at_ends, self.cpu_at_ends[1:], strict=False)]
        return {
            "first_cycle_seconds": round(self.first_cycle_seconds, 2),
            # upstream's dry run decides over a partly mirrored cluster at first
            "first_complete_cycle": self.first_complete + 1,
            "first_complete_cycle_seconds": round(self.cycle_ends[self.first_complete], 2),
            "cpu_seconds_first_complete_cycle": round(self.cpu_at_ends[self.first_complete], 2),
            "steady_cycle_seconds": [round(g, 3) for g in gaps],
            "steady_cycle_median_seconds": round(statistics.median(gaps), 3),
            "peak_rss_mib": round(self.peak_rss_bytes / MIB, 1),
            "cpu_seconds_first_cycle": round(self.cpu_at_ends[0], 2),
            "cpu_seconds_per_steady_cycle": round(statistics.median(cpu), 3),
            "evictions": {plugin: len(pods) for plugin, pods in sorted(self.decisions.items())},
            "evictions_first_cycle": {
                plugin: len(pods) for plugin, pods in sorted(self.first_decisions.items())
            },
        }


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status")


def measure(command: list[str], parse: Any, log_path: Path) -> Measured:
    """Start `command`, read its log until 1 + STEADY_CYCLES cycles ended, stop it."""
    decisions: Decisions = {}
    cycles: list[Decisions] = []
    ends: list[float] = []
    cpu: list[float] = []
    start = time.monotonic()
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    assert proc.stdout is not None
    watchdog = threading.Timer(RUN_TIMEOUT_SECONDS, proc.kill)
    watchdog.start()
    process = psutil.Process(proc.pid)
    peak = 0
    try:
        with log_path.open("w") as log:
            for line in proc.stdout:
                log.write(line)
                event = parse(line)
                if isinstance(event, Eviction):
                    decisions.setdefault(event.plugin, {})[event.pod] = event.node
                elif isinstance(event, CycleEnd):
                    ends.append(time.monotonic() - start)
                    cycles.append(decisions)
                    decisions = {}
                    times = process.cpu_times()
                    cpu.append(times.user + times.system)
                    if len(ends) > STEADY_CYCLES:
                        break
            peak = _peak_rss(proc.pid) if proc.poll() is None else 0
    finally:
        watchdog.cancel()
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if len(ends) <= STEADY_CYCLES:
        raise RuntimeError(
            f"{command[0]} stopped after {len(ends)} cycles (exit {proc.returncode}); "
            f"its log: {log_path}"
        )
    return Measured(ends[0], ends, cpu, peak, cycles)


def upstream_command(
    binary: Path, kubeconfig: Path, policy: Path, workdir: Path, extra: Iterable[str] = ()
) -> list[str]:
    return [
        str(binary),
        f"--policy-config-file={policy}",
        f"--kubeconfig={kubeconfig}",
        "--dry-run",
        f"--descheduling-interval={INTERVAL}",
        "--v=1",
        "--bind-address=127.0.0.1",
        f"--secure-port={controlplane.free_port()}",
        f"--cert-dir={workdir / 'upstream-certs'}",
        *extra,
    ]


def nodeqos_command(kubeconfig: Path, policy: Path) -> list[str]:
    binary = shutil.which("nodeqos-descheduler")
    if binary is None:
        raise RuntimeError("nodeqos-descheduler is not on PATH; run through hack/with-env.sh")
    return [
        binary,
        f"--config={policy}",
        f"--kubeconfig={kubeconfig}",
        "--dry-run",
        "--no-leader-elect",
        f"--metrics-addr=127.0.0.1:{controlplane.free_port()}",
    ]


def built_peer(name: str) -> Path:
    """A peer binary of hack/peers/ (built and cached by hack/build-peers.sh)."""
    out = subprocess.run(
        [str(REPO / "hack" / "build-peers.sh")], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"hack/build-peers.sh failed:\n{out.stderr}")
    return Path(out.stdout.strip()) / name


def version(binary: Path) -> str:
    out = subprocess.run([str(binary), "version"], capture_output=True, text=True, check=False)
    return (out.stdout or out.stderr).strip()


# -- the cluster -----------------------------------------------------------------------


def taint_nodes(client: rest.Rest, nodes: Iterable[int]) -> int:
    """Taint every TAINT_EVERY-th node; clear the others' taints.

    The API server's TaintNodesByCondition admission gives every new Node
    `node.kubernetes.io/not-ready:NoSchedule`, which the node lifecycle
    controller removes once the node is Ready; this control plane runs no
    controller manager, so the benchmark removes it, as the controller would.
    """

    def taint(i: int) -> bool:
        tainted = i % TAINT_EVERY == 0
        path = rest.object_path("", "v1", "nodes", f"node-{i:05d}")
        client.patch(path, {"spec": {"taints": [TAINT] if tainted else None}})
        return tainted

    with concurrent.futures.ThreadPoolExecutor(lownodeload.CREATE_THREADS) as pool:
        return sum(pool.map(taint, nodes))


def grow(client: rest.Rest, start: int, nodes: int) -> dict[str, Any]:
    count, seconds = lownodeload.create_objects(
        client, lownodeload.cluster_objects(nodes, start=start)
    )
    tainted = taint_nodes(client, range(start, nodes))
    return {"objects": count, "seconds": round(seconds, 1), "tainted_nodes": tainted}


def side_by_side(
    binary: Path,
    kubeconfig: Path,
    workdir: Path,
    label: str,
    *,
    policy: dict[str, Any] = POLICY,
    plugins: Iterable[str] = PLUGINS,
    upstream_args: Iterable[str] = (),
) -> dict[str, Any]:
    """Upstream, then nodeqos, on `policy` against the cluster at `kubeconfig`; both summaries,
    their ratios and the last cycles' decisions compared."""
    upstream_policy = workdir / "upstream-policy.yaml"
    upstream_policy.write_text(json.dumps(policy, indent=1))
    nodeqos_policy = workdir / "nodeqos-policy.yaml"
    nodeqos_policy.write_text(json.dumps({**policy, "deschedulingInterval": INTERVAL}, indent=1))
    runs = {}
    print(f"{label}: upstream descheduler ...", flush=True)
    runs["upstream"] = measure(
        upstream_command(binary, kubeconfig, upstream_policy, workdir, upstream_args),
        parse_upstream,
        workdir / f"upstream-{label}.log",
    )
    print(f"{label}: upstream {runs['upstream'].summary()}", flush=True)
    print(f"{label}: nodeqos-descheduler ...", flush=True)
    runs["nodeqos"] = measure(
        nodeqos_command(kubeconfig, nodeqos_policy),
        parse_nodeqos,
        workdir / f"nodeqos-{label}.log",
    )
    print(f"{label}: nodeqos {runs['nodeqos'].summary()}", flush=True)
    ours, theirs = runs["nodeqos"].summary(), runs["upstream"].summary()
    ratios = {
        key: round(ours[key] / theirs[key], 2) if theirs[key] else None
        for key in (
            "first_cycle_seconds",
            "first_complete_cycle_seconds",
            "cpu_seconds_first_complete_cycle",
            "steady_cycle_median_seconds",
            "peak_rss_mib",
            "cpu_seconds_first_cycle",
            "cpu_seconds_per_steady_cycle",
        )
    }
    return {
        "nodeqos": ours,
        "upstream": theirs,
        "ratios_nodeqos_over_upstream": ratios,
        "decisions": compare(
            runs["nodeqos"].decisions, runs["upstream"].decisions, plugins=plugins
        ),
    }


# The issue's first-cycle target ("start to the end of the first cycle, initial sync
# included") is judged on the first *complete* cycle: upstream's first dry-run
# cycle runs before its sandbox holds the cluster (at 5,000 nodes it evicts about
# 330 of the 10,300 pods its later cycles do), so it includes only part of the
# sync. first_cycle_seconds is still measured and published.
TARGETS = {
    "first_complete_cycle_seconds": 1.0,
    "peak_rss_mib": 1.0,
    "steady_cycle_median_seconds": 1.5,
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench peers",
        description="nodeqos-descheduler beside upstream descheduler v0.36, same cluster, same run.",
    )
    parser.add_argument(
        "--profile",
        action="append",
        choices=("requests", "usage"),
        help="requests: bench/peers.py POLICY at 1,000 then 5,000 nodes (about 15 min); usage: "
        "LowNodeUtilization on metrics-server usage (bench/_peersusage.py) at --usage-nodes "
        "(about 5 min at 1,000). Repeatable; default both. A run of one keeps the other's "
        "last published results in peers.json.",
    )
    parser.add_argument(
        "--small", action="store_true", help="the requests profile at 1,000 nodes only"
    )
    parser.add_argument(
        "--usage-nodes",
        type=int,
        default=lownodeload.SMALL[0],
        help=f"nodes of the usage profile's cluster, 30 pods each (default {lownodeload.SMALL[0]})",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args([] if argv is None else argv)
    profiles = set(args.profile or ("requests", "usage"))
    binary = built_peer("descheduler")
    results: dict[str, Any] = {}
    status = 0
    if "requests" not in profiles:
        # keep the requests profile's last published numbers beside the new usage ones
        previous = dict(previous_results("peers") or {})
        for key in ("benchmark", "machine", "usage_profile"):
            previous.pop(key, None)
        if "recorded_at" in previous:
            previous["requests_profile_recorded_at"] = previous.pop("recorded_at")
        results.update(previous)
    else:
        results.update(run_requests(binary, small_only=args.small))
        failed = [k for k, v in results["targets_at_largest"].items() if not v["pass"]]
        for key in failed:
            print(f"target missed: {key}: {results['targets_at_largest'][key]}", flush=True)
        status = 1 if failed else 0
    if "usage" in profiles:
        from bench import _peersusage

        logs = REPO / "bench" / "results" / "local"
        usage = _peersusage.run(binary, args.usage_nodes, logs)
        usage["recorded_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        results["usage_profile"] = usage
    path = write_results("peers", results)
    print(f"{'FAIL' if status else 'PASS'}: {path}", flush=True)
    return status


def run_requests(binary: Path, *, small_only: bool) -> dict[str, Any]:
    """The requests profile (POLICY) at 1,000 and then 5,000 nodes in one control plane."""
    results: dict[str, Any] = {
        "upstream": version(binary),
        "policy": POLICY,
        "interval": INTERVAL,
        "steady_cycles": STEADY_CYCLES,
        "taint_every": TAINT_EVERY,
        "load_average_before": round(os.getloadavg()[0], 2),
    }
    with (
        tempfile.TemporaryDirectory(prefix="nodeqos-peers-") as tmp,
        controlplane.ControlPlane() as plane,
    ):
        workdir = Path(tmp)
        client = rest.Rest.from_kubeconfig(
            plane.kubeconfig, qps=0, pool_size=lownodeload.CREATE_THREADS * 2
        )
        for n in range(lownodeload.NAMESPACES):
            client.create("/api/v1/namespaces", {"metadata": {"name": f"team-{n:02d}"}})
        sizes = [lownodeload.SMALL] if small_only else [lownodeload.SMALL, lownodeload.LARGE]
        start = 0
        for nodes, pods in sizes:
            label = f"nodes_{nodes}_pods_{pods}"
            created = grow(client, start, nodes)
            start = nodes
            print(f"{label}: created {created}", flush=True)
            results[label] = {
                "created": created,
                **side_by_side(binary, plane.kubeconfig, workdir, label),
            }
            logs = REPO / "bench" / "results" / "local"
            logs.mkdir(parents=True, exist_ok=True)
            for peer in ("upstream", "nodeqos"):
                shutil.copy(workdir / f"{peer}-{label}.log", logs / f"peers-{peer}-{label}.log")
    results["load_average_after"] = round(os.getloadavg()[0], 2)
    largest = results[f"nodes_{sizes[-1][0]}_pods_{sizes[-1][1]}"]
    targets = {
        key: {
            "ratio": largest["ratios_nodeqos_over_upstream"][key],
            "target_max": limit,
            "pass": (largest["ratios_nodeqos_over_upstream"][key] or 0) <= limit,
        }
        for key, limit in TARGETS.items()
    }
    results["targets_at_largest"] = targets
    return results


if __name__ == "__main__":
    if sys.argv[1:2] == ["--compare-logs"]:
        print(json.dumps(compare_logs(Path(sys.argv[2]), sys.argv[3]), indent=1))
    else:
        sys.exit(main(sys.argv[1:]))
