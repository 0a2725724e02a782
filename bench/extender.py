"""Benchmark of the scheduler extender: verb latency at scale, and its cost to kube-scheduler.

Run with `python -m bench extender`; writes extender.json (see bench/__init__.py).
`python -m bench.extender --quick` runs the latency part at 1,000 nodes only;
`python -m bench extender --framework-cost` the framework's cost alone, and
`--throughput` kube-scheduler's throughput arms alone, each put into the last
recorded extender.json.

- Latency: the LowNodeLoad benchmark's synthetic cluster (32-CPU nodes, 30 pods
  each, one NodeMetric per node, seeded) fed to a `ClusterView` as the informers
  would, served by the real HTTP server; a client posts ExtenderArgs naming
  *every* node (the worst case: kube-scheduler usually sends a sample, see
  percentageOfNodesToScore) over one keep-alive connection, as kube-scheduler
  does. Per call, round trip: `filter` and `prioritize` each, median and p99 of
  300 calls at 1,000 and 5,000 nodes, and at 5,000 nodes with the 500 names
  kube-scheduler really sends there. Every call is a pod of its own name and uid,
  but `lownodeload.pod_dict` gives only 16 request shapes (4 CPU x 4 memory), and
  the per-estimate cache resets every second: within a second, calls after the
  first of each shape can be answered from that cache, so these latencies are a
  mix of cached and uncached answers, as a burst of replicas would see. The
  uncached cost per pod is the server CPU part below.
  Target: p99 <= 10 ms at 5,000 nodes, every node named.
- Server CPU per pod: the same clusters and names, filter then prioritize of one
  pod called on the server's routes in-process (no HTTP), timed as thread CPU
  time; each pod has an estimate of its own, so no answer is cached. This is the
  measure the scheduler framework's overhead is judged by.
- The framework's cost (issue #29): the same server CPU per pod at 100 and 1,000
  nodes, the pre-framework extender (commit 6b202d9's `extender` and `kube`,
  exported from git history into the cache) against the framework
  (LoadAwareScheduling alone), both trees loaded in one process and every pod
  sent to one then the other, the order alternating; three such processes,
  medians compared (bench._fwcost, bench._extcpu).
  Target: at most 1.05x. Skipped, with the reason, without the git history.
- Throughput: one local control plane, the real kube-scheduler, 100 then 1,000 Nodes with
  fresh NodeMetrics and PODS pending pods created while the scheduler is
  stopped; the scheduler is started and timed until every pod is bound. Once
  with its default configuration, once with deploy/kube-scheduler/extender.yaml
  (the extender in the default profile), once with the same configuration pointed
  at the pre-framework extender (the same command run from the tree above; its
  throughput over the framework's is reported), same cluster, same run, each on a
  fresh batch of pods, in ROUNDS interleaved rounds (medians compared). Target: the
  extender costs at most 25% of the throughput.
- The floor: a third arm in the same rounds runs kube-scheduler with the same
  configuration pointed at hack/peers/nullextender, a Go extender that passes
  every node and scores each alike. What it costs is the price of the extender
  protocol itself (kube-scheduler's HTTP client and JSON work for two calls per
  pod), which no extender can go below; nodeqos's cost is reported beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import _fwcost, lownodeload, machine_info, peers, previous_results, write_results
from extender import args as argsmod
from extender import local, server
from extender.view import ClusterView
from kube import cache, rest
from testbed import controlplane, localcluster

REPO = Path(__file__).resolve().parent.parent
CALLS = 300
SIZES = (1_000, 5_000)
TARGET_P99_SECONDS = 0.010
TARGET_THROUGHPUT_COST = 0.25
NODES = (100, 1_000)  # the second size adds nodes to the first
PODS = 500
ROUNDS = 5


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def build_view(nodes: int) -> ClusterView:
    """The synthetic cluster in a view, fed one object at a time; NodeMetrics fresh."""
    view = ClusterView(argsmod.decode_args({}))
    now = datetime.now(UTC).replace(microsecond=0)
    for obj in lownodeload.cluster_objects(nodes, updated=now):
        kind = obj["kind"]
        if kind == "Node":
            view.on_node("ADDED", None, view.project_node(obj))
        elif kind == "Pod":
            view.on_pod("ADDED", None, view.project_pod(obj))
        else:
            view.on_metric("ADDED", None, view.project_metric(obj))
    view.node_usage("node-00000")  # compute every node once, as the first verb would
    return view


def sampled(nodes: int) -> int:
    """How many nodes kube-scheduler sends with the default percentageOfNodesToScore.

    Its adaptive default scores 50% minus 1% per 125 nodes, at least 5%, and never
    fewer than 100 nodes: 500 names at 5,000 nodes.
    """
    percent = max(5, 50 - nodes // 125)
    return min(nodes, max(100, nodes * percent // 100))


def time_verbs(nodes: int, sent: int | None = None) -> dict[str, Any]:
    """Round-trip latency of both verbs; `sent` names per call (default: every node)."""
    view = build_view(nodes)
    names = [f"node-{i:05d}" for i in range(nodes)][: sent or nodes]
    http_server = server.HttpServer(
        ("127.0.0.1", 0), view, server.CollectorRegistry(), lambda: {"ready": True}
    )
    connection = http.client.HTTPConnection(*http_server.address, timeout=30)
    results: dict[str, Any] = {
        "nodes": nodes,
        "pods": nodes * lownodeload.PODS_PER_NODE,
        "names_per_call": len(names),
    }
    try:
        for verb in ("filter", "prioritize"):
            timings = []
            for i in range(CALLS + 10):
                pod = lownodeload.pod_dict(f"incoming-{i}", "bench", "", 10**7 + i, 0)
                pod["spec"].pop("nodeName", None)
                pod["metadata"]["uid"] = f"incoming-{verb}-{i}"
                body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}).encode()
                start = time.perf_counter()
                connection.request("POST", f"/{verb}", body)
                reply = connection.getresponse()
                data = reply.read()
                elapsed = time.perf_counter() - start
                assert reply.status == 200, data[:200]
                if i >= 10:  # warm-up calls are not counted
                    timings.append(elapsed)
            results[verb] = {
                "median_ms": round(statistics.median(timings) * 1000, 3),
                "p99_ms": round(_percentile(timings, 0.99) * 1000, 3),
                "calls": len(timings),
            }
    finally:
        connection.close()
        http_server.close()
    return results


def server_cpu(nodes: int, sent: int | None = None, pods: int = 200) -> dict[str, Any]:
    """The extender's own CPU per pod: filter then prioritize of one pod, through the
    server's routes in this thread (no HTTP, no client), measured as thread CPU time,
    so other work on a shared machine barely moves it. Each pod its own estimate."""
    view = build_view(nodes)
    registry = server.CollectorRegistry()
    routes = server.routes(server.as_framework(view, registry), server.Telemetry(registry))
    filter_, prioritize = routes["/filter"], routes["/prioritize"]
    names = [f"node-{i:05d}" for i in range(nodes)][: sent or nodes]
    timings = []
    for i, body in enumerate(_fwcost.bodies(names, pods + 10)):
        start = time.thread_time()
        assert filter_(body)[0] == 200 and prioritize(body)[0] == 200
        if i >= 10:  # warm-up pods are not counted
            timings.append(time.thread_time() - start)
    return {
        "nodes": nodes,
        "names_per_call": len(names),
        "median_ms": round(statistics.median(timings) * 1000, 3),
        "mean_ms": round(statistics.mean(timings) * 1000, 3),
        "pods": pods,
    }


def _register(client: rest.Rest, first: int, last: int) -> None:
    """Nodes `first`..`last - 1`, each with a fresh NodeMetric (4 to 9 of 32 cores used)."""
    now = datetime.now(UTC).replace(microsecond=0)
    for i in range(first, last):
        name = f"sched-{i:04d}"
        localcluster.register_node(client, name, cpu="32", memory="128Gi", pods="110")
        metric = lownodeload.nodemetric_dict(name, [], (4_000 + 100 * (i % 50), 8 << 30), now)
        created = client.create(lownodeload.NODEMETRICS, {**metric, "status": {}})
        created["status"] = metric["status"]
        client.replace(f"{lownodeload.NODEMETRICS}/{name}/status", created)


def _create_pods(client: rest.Rest, batch: str, count: int) -> None:
    path = "/api/v1/namespaces/bench/pods"
    for i in range(count):
        client.create(
            path,
            {
                "metadata": {"name": f"{batch}-{i:05d}", "labels": {"batch": batch}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.local/app:1",
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                        }
                    ]
                },
            },
        )


def _time_scheduling(
    plane: controlplane.ControlPlane, client: rest.Rest, batch: str, config: Any
) -> dict[str, Any]:
    """Pods bound per second, from the first binding to the last.

    The bindings are watched by an informer (which re-watches if the API server
    drops a slow watcher), not polled: a LIST ten times a second would load the
    API server more than the scheduler under test. The scheduler's own start-up
    (process, informer sync) is left out of the time.
    """
    plane.stop_scheduler()
    _create_pods(client, batch, PODS)
    bound_at: dict[str, float] = {}
    done = threading.Event()

    def on_event(kind: str, old: Any, new: tuple[str, bool] | None) -> None:
        if new is not None and new[1] and new[0] not in bound_at:
            bound_at[new[0]] = time.perf_counter()
            if len(bound_at) == PODS:
                done.set()

    watcher = cache.Informer(
        client,
        cache.PODS,
        project=lambda pod: (pod["metadata"]["name"], bool(pod["spec"].get("nodeName"))),
        namespace="bench",
        label_selector=f"batch={batch}",
        on_event=on_event,
        name=f"bench-{batch}",
    )
    watcher.start()
    try:
        watcher.wait_synced(60)
        plane.start_scheduler(config)
        if not done.wait(600):
            raise TimeoutError(f"{batch}: {len(bound_at)}/{PODS} bound after 600 s")
    finally:
        watcher.stop()
    seconds = max(bound_at.values()) - min(bound_at.values())
    return {
        "pods": PODS,
        "seconds": round(seconds, 3),
        "pods_per_second": round((PODS - 1) / seconds, 1),
    }


def _compare(
    plane: controlplane.ControlPlane,
    client: rest.Rest,
    nodes: int,
    configs: dict[str, Any],
) -> dict[str, Any]:
    """Interleaved rounds of every arm (`configs`: label -> scheduler config, None for
    its defaults), medians compared: on a shared machine a burst of someone else's
    work then hurts every arm alike."""
    _time_scheduling(plane, client, f"warm-up-{nodes}", None)  # untimed: warm caches
    arms = {"default": None, **configs}
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in arms}
    loads_seen = []
    labels = list(arms)
    for round_ in range(ROUNDS):
        # each round starts one arm later: no arm always follows the same one (the
        # rounds before leave their pods' events in every extender's informers)
        for label in labels[round_ % len(labels) :] + labels[: round_ % len(labels)]:
            config = arms[label]
            batch = f"{label.replace('_', '-')}-{nodes}-{round_}"  # a pod name's part
            loads_seen.append(os.getloadavg()[0])
            runs[label].append(_time_scheduling(plane, client, batch, config))
    median = {
        label: sorted(runs[label], key=lambda r: r["pods_per_second"])[ROUNDS // 2]
        for label in arms
    }
    rate = {label: median[label]["pods_per_second"] for label in arms}
    result: dict[str, Any] = {
        "nodes": nodes,
        "default": median["default"],
        "with_extender": median["extender"],
        "with_null_extender": median["null"],
        "rounds": runs,
        "throughput_cost": round(1 - rate["extender"] / rate["default"], 3),
        "protocol_floor_cost": round(1 - rate["null"] / rate["default"], 3),
        "load_average_1m": [round(min(loads_seen), 1), round(max(loads_seen), 1)],
    }
    if "pre_framework" in arms:
        result["with_pre_framework_extender"] = median["pre_framework"]
        result["pre_framework_cost"] = round(1 - rate["pre_framework"] / rate["default"], 3)
        # the framework's throughput over the pre-framework extender's (1.0: the same)
        result["framework_over_pre_framework"] = round(rate["extender"] / rate["pre_framework"], 3)
    return result


def time_scheduler(pre: Path | None = None) -> list[dict[str, Any]]:
    """kube-scheduler's throughput with no extender, nodeqos's, the pre-framework nodeqos
    extender (when `pre`, its tree, is given) and the null one, at each of NODES."""
    null_binary = peers.built_peer("nullextender")
    shipped = REPO / "deploy" / "kube-scheduler" / "extender.yaml"
    results = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        controlplane.ControlPlane(scheduler=False) as plane,
        contextlib.ExitStack() as processes,
    ):
        client = rest.Rest.from_kubeconfig(plane.kubeconfig, qps=0)
        localcluster.apply(
            client, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}
        )
        ports = {"extender": controlplane.free_port(), "null": controlplane.free_port()}
        commands = {
            "extender": (local.command(plane.kubeconfig, None, ports["extender"]), None),
            "null": ([str(null_binary), "--listen", f"127.0.0.1:{ports['null']}"], None),
        }
        if pre is not None:
            ports["pre_framework"] = controlplane.free_port()
            # the same command, the pre-framework tree first on the path
            argv = local.command(plane.kubeconfig, None, ports["pre_framework"])
            commands["pre_framework"] = (argv, {"PYTHONPATH": _fwcost.pythonpath(pre)})
        for name, (argv, env) in commands.items():
            processes.enter_context(_running(argv, Path(tmp) / f"{name}.log", env))
        for name, port in ports.items():
            try:
                local.wait_ready(port)
            except TimeoutError:
                log = (Path(tmp) / f"{name}.log").read_text(errors="replace")
                print(f"{name} never became ready; its log ends:\n{log[-2000:]}", flush=True)
                raise
        configs = {name: local.point_scheduler(shipped, port) for name, port in ports.items()}
        registered = 0
        for nodes in NODES:
            _register(client, registered, nodes)
            registered = nodes
            time.sleep(2)  # let the extenders' caches take the new nodes in
            results.append(_compare(plane, client, nodes, configs))
    return results


@contextlib.contextmanager
def _running(
    argv: list[str], log_path: Path, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """A process for the length of the block, its output in `log_path`; `env` is added
    to this one's, and the process runs in the log's directory (not the checkout, which
    `python -m` would put first on the path)."""
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=None if env is None else {**os.environ, **env},
            cwd=log_path.parent,
        )
        try:
            yield proc
        finally:
            proc.terminate()
            proc.wait(15)


def framework_cost() -> tuple[Path | None, list[dict[str, Any]] | str]:
    """The pre-framework tree and the server-CPU comparison at each of NODES, or the
    reason it cannot run here."""
    try:
        pre = _fwcost.pre_framework_tree()
    except _fwcost.Unavailable as err:
        return None, f"skipped: {err}"
    results = []
    for nodes in NODES:
        gc.collect()
        result = _fwcost.server_cpu(pre, nodes)
        results.append(result)
        print(
            f"{nodes} nodes: server CPU per pod, pre-framework {result['pre_median_ms']} ms,"
            f" framework {result['framework_median_ms']} ms: {result['ratio']}x"
            f" (target {_fwcost.TARGET_RATIO}x; medians of {result['rounds']} interleaved"
            f" rounds, load average {result['load_average_1m']})",
            flush=True,
        )
    return pre, results


def framework_cost_only() -> int:
    """`--framework-cost`: the comparison alone, put into the last recorded extender.json
    (its other parts and their `recorded_at`/`machine` kept as they were; this part
    gets `framework_cost_recorded_at`/`framework_cost_machine`)."""
    _, cost = framework_cost()
    if isinstance(cost, str):
        print(f"framework cost against the pre-framework extender {cost}", flush=True)
        return 0
    _record_part("framework_cost", cost, "framework_cost")
    return 0 if all(r["met"] for r in cost) else 1


def throughput_only() -> int:
    """`--throughput`: kube-scheduler's throughput arms alone (with the pre-framework
    extender when git history has it), put into the last recorded extender.json as
    `framework_cost_only` does (`throughput_recorded_at`/`throughput_machine`)."""
    try:
        pre: Path | None = _fwcost.pre_framework_tree()
    except _fwcost.Unavailable as err:
        print(f"the pre-framework arm is skipped: {err}", flush=True)
        pre = None
    throughput = time_scheduler(pre)
    for result in throughput:
        _print_throughput(result)
    _record_part("scheduler_throughput", throughput, "throughput")
    return 0


def _record_part(key: str, value: Any, prefix: str) -> None:
    """`value` as `key` of the last recorded extender.json, the rest kept as it was,
    with `<prefix>_recorded_at` and `<prefix>_machine` saying when and where."""
    document = previous_results("extender") or {}
    document.pop("benchmark", None)
    write_results(
        "extender",
        {
            **document,
            key: value,
            f"{prefix}_recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            f"{prefix}_machine": machine_info(),
        },
    )


def _print_throughput(result: dict[str, Any]) -> None:
    pre_text = (
        f"{result['with_pre_framework_extender']['pods_per_second']} pods/s with the"
        f" pre-framework extender (cost {result['pre_framework_cost']:.0%}; framework /"
        f" pre-framework {result['framework_over_pre_framework']}x), "
        if "pre_framework_cost" in result
        else ""
    )
    print(
        f"kube-scheduler, {result['nodes']} nodes / {PODS} pods: "
        f"{result['default']['pods_per_second']} pods/s default, "
        f"{result['with_extender']['pods_per_second']} pods/s with the extender "
        f"(cost {result['throughput_cost']:.0%}), {pre_text}"
        f"{result['with_null_extender']['pods_per_second']} pods/s with the null extender "
        f"(the protocol's floor: {result['protocol_floor_cost']:.0%})",
        flush=True,
    )


def parse(argv: list[str]) -> argparse.Namespace:
    """The benchmark's options; --help prints them and runs nothing."""
    parser = argparse.ArgumentParser(
        prog="python -m bench extender", description=(__doc__ or "").split("\n")[0]
    )
    parts = parser.add_mutually_exclusive_group()
    parts.add_argument(
        "--quick", action="store_true", help="the latency and CPU parts at 1,000 nodes only"
    )
    parts.add_argument(
        "--framework-cost",
        action="store_true",
        help="the framework's cost alone, put into the last recorded extender.json",
    )
    parts.add_argument(
        "--throughput",
        action="store_true",
        help="kube-scheduler's throughput arms alone, put into the last recorded extender.json",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    options = parse(argv if argv is not None else sys.argv[1:])
    if options.framework_cost:
        return framework_cost_only()
    if options.throughput:
        return throughput_only()
    quick = options.quick
    latency = []
    cases: list[tuple[int, int | None]] = [(n, None) for n in (SIZES[:1] if quick else SIZES)]
    if not quick:
        cases.append((SIZES[-1], sampled(SIZES[-1])))
    for nodes, sent in cases:
        gc.collect()
        result = time_verbs(nodes, sent)
        latency.append(result)
        print(
            f"{nodes} nodes, {result['names_per_call']} names per call: filter median {result['filter']['median_ms']} ms p99 "
            f"{result['filter']['p99_ms']} ms; prioritize median "
            f"{result['prioritize']['median_ms']} ms p99 {result['prioritize']['p99_ms']} ms",
            flush=True,
        )
    cpu = []
    for nodes, sent in cases:
        gc.collect()
        result = server_cpu(nodes, sent)
        cpu.append(result)
        print(
            f"{nodes} nodes, {result['names_per_call']} names per call: server CPU per pod"
            f" (filter + prioritize) median {result['median_ms']} ms",
            flush=True,
        )
    if quick:
        return 0
    at_largest = [r for r in latency if r["nodes"] == SIZES[-1]]
    worst = max(max(r["filter"]["p99_ms"], r["prioritize"]["p99_ms"]) for r in at_largest)
    pre, cost = framework_cost()
    if isinstance(cost, str):
        print(f"framework cost against the pre-framework extender {cost}", flush=True)
    throughput = time_scheduler(pre)
    for result in throughput:
        _print_throughput(result)
    worst_cost = max(r["throughput_cost"] for r in throughput)
    throughput_met = worst_cost <= TARGET_THROUGHPUT_COST
    latency_met = worst / 1000 <= TARGET_P99_SECONDS
    write_results(
        "extender",
        {
            "latency": latency,
            "server_cpu_per_pod": cpu,
            "framework_cost": cost,
            "latency_target": {
                "p99_ms_at_5000_nodes": TARGET_P99_SECONDS * 1000,
                "worst_p99_ms": worst,
                "met": latency_met,
            },
            "scheduler_throughput": throughput,
            "throughput_target": {
                "max_cost": TARGET_THROUGHPUT_COST,
                "worst_cost": worst_cost,
                "met": throughput_met,
                "worst_protocol_floor_cost": max(r["protocol_floor_cost"] for r in throughput),
            },
        },
    )
    cost_met = isinstance(cost, str) or all(r["met"] for r in cost)
    return 0 if latency_met and throughput_met and cost_met else 1


if __name__ == "__main__":
    sys.exit(main())
