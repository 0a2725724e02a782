"""The nodeqos demo: measured usage drives eviction and placement, end to end. Run: `make demo`.

It runs on real nodes when this machine can run them (realnodes.py: root, the
kubelet and containerd of hack/node-setup.sh, the image of hack/node-image.sh):
three real kubelets run the pods and the demo plays no part of Kubernetes; the
scenario is testbed.placementloop's, the one the e2e test runs, followed by a
second scenario, colocation (testbed.colocationloop, also an e2e test): idle
online Deployments' slack published as batch-cpu, a batch Job placed on it by
kube-scheduler, online pressure shrinking it while BE suppression throttles the
batch pods, and a stopped agent sending its node's Batch resources to zero.
`--scenario placement|colocation|all` picks (colocation needs real nodes).
Otherwise it falls back to process-based nodes, described below, and says why.
`--nodes` chooses.

Process-based nodes:

1. A real local control plane: etcd, kube-apiserver, kube-controller-manager
   (deployment, replicaset, daemonset, disruption, garbage-collector
   controllers) and kube-scheduler, configured with the nodeqos scheduler
   extender; the CRDs, RBAC and descheduler ConfigMap from deploy/.
2. Three nodes; real Deployments, a DaemonSet and a PDB (scenario.py). n1 runs
   hot although its requests are the lowest. In each pod's cgroup a real busy
   process (or, without a writable cgroup v1, a load generator).
3. One real `nodeqos-agent` per node, in cluster mode under its ServiceAccount,
   publishing the node's NodeMetric; one `nodeqos-scheduler-extender`.
4. A real `nodeqos-descheduler` with a LowNodeLoad profile evicts from n1
   through the Eviction API (the PDB, kept by the real disruption controller,
   holds); the real ReplicaSet controller makes the replacement and the real
   scheduler, asking the extender, places it on a cool node.
5. The demo plays only the kubelet: it starts a pod's busy process once the
   scheduler has bound it, reports it Running, and stops it on deletion.

`--scheduler default` runs the same story without the extender, to show what
placement by requests does (the replacement goes back to the hot node).
Everything is torn down at the end, on Ctrl-C and on SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import re
import signal
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from types import FrameType
from typing import Any

import realnodes
import scenario
import view
import workload
import yaml

from extender import local
from kube import quantity, rest
from testbed import controlplane, localcluster, localnodes

REPO = Path(__file__).resolve().parents[2]
HIGH, LOW = 45.0, 30.0
TOWARDS = re.compile(r"from node (\S+) towards node (\S+) by (\S+?)(?:,|:)")


def extender_config() -> dict[str, Any]:
    """deploy/'s LoadAwareSchedulingArgs with the demo's threshold: the scheduler stops
    filling a node below the descheduler's high threshold, so it never refills what
    the descheduler drains."""
    for doc in yaml.safe_load_all((REPO / "deploy" / "scheduler-extender.yaml").read_text()):
        if doc and doc["kind"] == "ConfigMap":
            args: dict[str, Any] = yaml.safe_load(doc["data"]["loadaware.yaml"])
            # Below LowNodeLoad's high mark, with headroom for the estimate being
            # low (requests, not usage): the scheduler must stop filling a node well
            # before the descheduler would drain it again.
            args["usageThresholds"] = {**args["usageThresholds"], "cpu": int(HIGH) - 5}
            # The demo's nodes report every second; a minute-old report is stale here.
            args["nodeMetricExpirationSeconds"] = 60
            return args
    raise LookupError("deploy/scheduler-extender.yaml has no ConfigMap")


def extender_argv(kubeconfig: Path, config_file: Path, port: int) -> list[str]:
    return local.command(kubeconfig, config_file, port)


def scheduler_with_extender(port: int) -> dict[str, Any]:
    """deploy/kube-scheduler/extender.yaml (the default profile, load-aware), pointed here."""
    return local.point_scheduler(REPO / "deploy" / "kube-scheduler" / "extender.yaml", port)


def descheduler_config(metrics_port: int) -> dict[str, Any]:
    """The ConfigMap's configuration from deploy/descheduler.yaml, tuned to a 2-minute demo."""
    for doc in yaml.safe_load_all((REPO / "deploy" / "descheduler.yaml").read_text()):
        if doc and doc.get("kind") == "ConfigMap":
            config: dict[str, Any] = yaml.safe_load(doc["data"]["descheduler.yaml"])
            break
    else:
        raise SystemExit("deploy/descheduler.yaml has no ConfigMap")
    config = copy.deepcopy(config)
    config["deschedulingInterval"] = "10s"
    config["evictionFailureEventNotification"] = True  # a refused eviction is an Event too
    config["metricsBindAddress"] = config["healthzBindAddress"] = f"127.0.0.1:{metrics_port}"
    for entry in config["profiles"][0]["pluginConfig"]:
        if entry["name"] == "LowNodeLoad":
            entry["args"].update(
                lowThresholds={"cpu": int(LOW), "memory": 55},
                highThresholds={"cpu": int(HIGH), "memory": 80},
                anomalyCondition={"consecutiveAbnormalities": 1},
            )
            entry["args"]["evictableNamespaces"] = {"exclude": ["kube-system", "nodeqos-system"]}
    return config


class Demo:
    def __init__(
        self,
        workdir: Path,
        *,
        timeout: float,
        scheduler: str = "nodeqos",
        settle: float = 0.0,
        out: Any = sys.stdout,
    ) -> None:
        self.workdir = workdir
        self.timeout = timeout
        self.scheduler = scheduler
        self.settle = settle
        self.out = out
        self.run_id = uuid.uuid4().hex[:8]
        self.trees: dict[str, workload.NodeTree] = {}
        self.running: dict[str, str] = {}  # pod uid -> node whose tree holds its process
        self.procs: list[Any] = []
        self.decisions: list[dict[str, str]] = []
        self.seen_events: set[str] = set()
        self.evicted: dict[str, dict[str, str]] = {}  # pod uid -> decision
        self.moves: list[dict[str, str]] = []
        self.initial: set[str] = set()  # uids of the pods placed at set-up
        self.before: dict[str, float] = {}
        self.moved_at: float | None = None
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    # -- set-up ----------------------------------------------------------------------

    def run(self, stack: contextlib.ExitStack) -> dict[str, Any]:
        started = time.monotonic()
        plane = controlplane.ControlPlane(controllers=True)
        stack.callback(plane.stop)
        plane.start()
        self.say(
            f"control plane up at {plane.url} ({time.monotonic() - started:.1f}s): etcd, "
            "kube-apiserver, kube-controller-manager, CRDs installed"
        )
        self.admin = rest.Rest.from_kubeconfig(plane.kubeconfig, qps=0)
        for manifest in sorted((REPO / "deploy").glob("*.yaml")):
            for doc in yaml.safe_load_all(manifest.read_text()):
                if doc and doc["kind"] not in ("DaemonSet", "Deployment", "Service"):
                    localcluster.apply(self.admin, doc)
        self.say("applied RBAC and the ConfigMaps from deploy/")

        scheduler_config = None
        if self.scheduler == "nodeqos":
            port = controlplane.free_port()
            extender = plane.service_account(
                "nodeqos-system", "nodeqos-scheduler-extender", create=False
            )
            config_file = self.workdir / "extender.yaml"
            config_file.write_text(yaml.safe_dump(extender_config()))
            self.spawn("extender", extender_argv(extender.kubeconfig, config_file, port), stack)
            local.wait_ready(port)
            scheduler_config = scheduler_with_extender(port)
            self.say(
                f"started nodeqos-scheduler-extender on 127.0.0.1:{port}: usage threshold cpu "
                f"{HIGH - 5:.0f}%, scores by measured usage (ServiceAccount nodeqos-scheduler-extender)"
            )
        plane.start_scheduler(scheduler_config)
        self.say(
            "started kube-scheduler "
            + (
                "with the nodeqos extender (filter + prioritize, ignorable)"
                if scheduler_config
                else "with its default profile only (placement by requests)"
            )
        )

        real = workload.real_cgroups_writable()
        self.mode = "real" if real else "fake"
        self.say(
            "load: real busy processes in cgroup v1 pod cgroups, held by CFS quotas"
            if real
            else "load: cgroup v1 is not writable here, so a load generator advances the pods' "
            "cpuacct counters in a fake tree instead of real processes"
        )
        stack.callback(self.close_trees)
        for node in scenario.NODES:
            self.trees[node] = workload.NodeTree(node, self.workdir, real=real, run_id=self.run_id)
        kubelet = threading.Thread(target=self.kubelet_loop, name="demo-kubelet", daemon=True)
        kubelet.start()
        stack.callback(self.stop.set)

        scenario.create_cluster(self.admin)
        scenario.place(self.admin)
        with self.lock:
            self.initial = {p["metadata"]["uid"] for p in scenario.bound_pods(self.admin)}
        self.say(
            f"cluster: nodes {', '.join(scenario.NODES)} (1 CPU, 16Gi each); Deployments "
            f"{', '.join(w.name for w in scenario.WORKLOADS)}, DaemonSet exporter, PDB web "
            f"minAvailable=2; {len(self.initial)} pods placed by the real scheduler"
        )
        self.say(self.placement_line())

        for node in scenario.NODES:
            tree = self.trees[node]
            # Bound to its Node, as the kubelet's token is: the admission policy in
            # deploy/daemonset.yaml lets it write that node's NodeMetric only.
            agent = plane.service_account(
                "nodeqos-system", "nodeqos-agent", create=False, node=node
            )
            self.spawn(
                f"agent-{node}",
                [
                    sys.executable,
                    "-m",
                    "agent",
                    "--node-name",
                    node,
                    "--kubeconfig",
                    str(agent.kubeconfig),
                    "--cgroup-root",
                    str(tree.cgroup_root),
                    "--proc-root",
                    str(tree.proc_root),
                    "--metric-cache-path",
                    str(self.workdir / node / "metriccache.db"),
                    "--collect-interval",
                    "1s",
                    "--metrics-addr",
                    f"127.0.0.1:{controlplane.free_port()}",
                ],
                stack,
            )
        self.say(
            "started 3 nodeqos-agent processes (cluster mode, ServiceAccount nodeqos-agent, "
            "each token bound to its node)"
        )
        waited = self.wait_measured()
        self.say(
            f"every node's NodeMetric has measured its pods ({waited:.0f}s): a pod scheduled "
            "less than one report ago still counts with its estimate in the extender"
        )

        descheduler = plane.service_account("nodeqos-system", "nodeqos-descheduler", create=False)
        config_file = self.workdir / "descheduler.yaml"
        config_file.write_text(yaml.safe_dump(descheduler_config(controlplane.free_port())))
        self.spawn(
            "descheduler",
            [
                sys.executable,
                "-m",
                "descheduler.cli",
                "--config",
                str(config_file),
                "--kubeconfig",
                str(descheduler.kubeconfig),
            ],
            stack,
        )
        self.say(
            f"started nodeqos-descheduler: LowNodeLoad low cpu {LOW:.0f}% / high cpu {HIGH:.0f}%, "
            "every 10s, Eviction API (ServiceAccount nodeqos-descheduler)\n"
        )
        return self.watch(started)

    def wait_measured(self, timeout: float = 120.0) -> float:
        """Wait until each NodeMetric was updated a full report interval after the last
        pod started: until then the pods are new to the scheduler's estimator (as in
        any cluster right after a rollout), and the story would be about that."""
        started = time.monotonic()
        interval = scenario.NODEMETRIC_SPEC["metricCollectPolicy"]["reportIntervalSeconds"]
        pods = scenario.bound_pods(self.admin)
        newest = max(_parse_time(p["metadata"]["creationTimestamp"]) for p in pods)
        path = rest.object_path("slo.koordinator.sh", "v1alpha1", "nodemetrics")
        while time.monotonic() - started < timeout:
            metrics = self.admin.get(path)["items"]
            updated = [
                _parse_time(m["status"]["updateTime"])
                for m in metrics
                if m["metadata"]["name"] in scenario.NODES and m.get("status", {}).get("updateTime")
            ]
            if len(updated) == len(scenario.NODES) and min(updated) - interval > newest:
                return time.monotonic() - started
            time.sleep(1)
        raise TimeoutError(f"the agents did not report within {timeout:.0f}s")

    def spawn(self, name: str, argv: list[str], stack: contextlib.ExitStack) -> None:
        import subprocess

        log = (self.workdir / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            preexec_fn=workload._die_with_parent,
        )
        self.procs.append(proc)

        def end() -> None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            log.close()

        stack.callback(end)

    def placement_line(self) -> str:
        with self.lock:
            held = dict(self.running)
        by_node: dict[str, list[str]] = {n: [] for n in scenario.NODES}
        for pod in scenario.bound_pods(self.admin):
            if pod["metadata"]["uid"] in held:
                by_node[pod["spec"]["nodeName"]].append(scenario.app(pod))
        return "  placement: " + "; ".join(
            f"{node}: {' '.join(sorted(apps))}" for node, apps in by_node.items()
        )

    # -- the loop ----------------------------------------------------------------------

    def watch(self, started: float) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        last_shown: dict[str, str] = {}
        cooled_at: float | None = None
        stayed_cool = True
        nodes: list[view.NodeView] = []
        while time.monotonic() < deadline:
            time.sleep(1.0)
            self.read_events()
            metrics = {
                m["metadata"]["name"]: m
                for m in self.admin.get(
                    rest.object_path("slo.koordinator.sh", "v1alpha1", "nodemetrics")
                )["items"]
            }
            stamps = {n: str(m.get("status", {}).get("updateTime", "")) for n, m in metrics.items()}
            nodes = [self.node_view(n, metrics.get(n)) for n in scenario.NODES]
            for node in nodes:
                if node.cpu_percent is not None and node.name not in self.before:
                    self.before[node.name] = node.cpu_percent
            if stamps != last_shown and all(stamps.values()):
                last_shown = stamps
                self.say(
                    view.table(
                        f"NodeMetrics at +{time.monotonic() - started:.0f}s",
                        nodes,
                        self.before,
                        HIGH,
                        LOW,
                    )
                )
            with self.lock:
                moved_at = self.moved_at
            hot = nodes[0]
            fresh = metrics.get("n1", {}).get("status", {}).get("updateTime")
            is_cool = (hot.cpu_percent or 100) <= HIGH
            if cooled_at is None:
                if (
                    moved_at is not None
                    and fresh
                    and _parse_time(fresh) > moved_at + 20
                    and is_cool
                ):
                    cooled_at = time.monotonic()
                    if self.settle:
                        self.say(f"  n1 cooled; watching {self.settle:.0f}s more")
            elif not is_cool:
                stayed_cool = False
            if cooled_at is not None and time.monotonic() >= cooled_at + self.settle:
                break
        return self.summary(nodes, cooled_at is not None, stayed_cool, time.monotonic() - started)

    def node_view(self, name: str, metric: dict[str, Any] | None) -> view.NodeView:
        with self.lock:
            pods = sum(1 for node in self.running.values() if node == name)
        usage = (
            (metric or {}).get("status", {}).get("nodeMetric", {}).get("nodeUsage", {}) or {}
        ).get("resources")
        if not usage:
            return view.NodeView(name, None, None, pods)
        cpu = quantity.cpu_millis(usage["cpu"]) / 10  # of 1000m
        memory = quantity.memory_bytes(usage["memory"]) / workload.NODE_MEMORY * 100
        return view.NodeView(name, cpu, memory, pods)

    def read_events(self) -> None:
        items = self.admin.get(rest.object_path("", "v1", "events", namespace=scenario.NAMESPACE))[
            "items"
        ]
        for event in sorted(items, key=lambda e: e["metadata"]["creationTimestamp"]):
            uid = event["metadata"]["uid"]
            if uid in self.seen_events or event["reason"] not in ("Descheduled", "EvictionFailed"):
                continue
            self.seen_events.add(uid)
            pod = event["involvedObject"]["name"]
            message = event["message"]
            if event["reason"] == "Descheduled":
                found = TOWARDS.search(message)
                source, target, plugin = found.groups() if found else ("?", "", "?")
                decision = {
                    "pod": f"{scenario.NAMESPACE}/{pod}",
                    "app": pod.split("-")[0],
                    "decision": "evicted",
                    "plugin": plugin,
                    "from": source,
                    "to": target,
                    "message": message,
                }
                with self.lock:
                    self.evicted[str(event["involvedObject"].get("uid", pod))] = decision
                self.decisions.append(decision)
                self.say(
                    f"  ⇢ evicted {pod} from {source} (descheduler's pick: {target or '?'}) — {message}"
                )
            else:
                self.decisions.append(
                    {
                        "pod": f"{scenario.NAMESPACE}/{pod}",
                        "app": pod.split("-")[0],
                        "decision": "refused",
                        "message": message,
                    }
                )
                self.say(f"  ✗ not evicted {pod} — {message}")

    def kubelet_loop(self) -> None:
        """Play the kubelet: run bound pods' processes, report status, finish deletions."""
        last = time.monotonic()
        while not self.stop.wait(0.5):
            now = time.monotonic()
            for tree in self.trees.values():
                tree.advance(now - last)
                tree.write_proc()
            last = now
            try:
                self.sync_pods()
            except (rest.ApiError, rest.ApiUnavailable) as err:
                print(f"demo kubelet: {err}", file=sys.stderr)

    def sync_pods(self) -> None:
        pods = self.admin.get(rest.object_path("", "v1", "pods", namespace=scenario.NAMESPACE))[
            "items"
        ]
        alive = set()
        for pod in pods:
            meta, node = pod["metadata"], pod["spec"].get("nodeName")
            uid = meta["uid"]
            alive.add(uid)
            if meta.get("deletionTimestamp"):
                self.stop_pod(uid)
                localcluster.finish_terminating(self.admin, scenario.NAMESPACE)
                continue
            with self.lock:
                started = uid in self.running
            if node and not started:
                reported = localcluster.mark_running(self.admin, pod)
                self.trees[node].add_pod(
                    uid, scenario.container_id(reported), scenario.millicores(pod)
                )
                with self.lock:
                    self.running[uid] = node
                self.placed(pod, node)
        with self.lock:
            gone = set(self.running) - alive
        for uid in gone:
            self.stop_pod(uid)

    def stop_pod(self, uid: str) -> None:
        with self.lock:
            node = self.running.pop(uid, None)
        if node is not None:
            self.trees[node].remove_pod(uid)

    def placed(self, pod: dict[str, Any], node: str) -> None:
        """A pod the scheduler bound after set-up: the replacement of an evicted one."""
        with self.lock:
            if not self.initial or pod["metadata"]["uid"] in self.initial:
                return
            name, app = pod["metadata"]["name"], scenario.app(pod)
            if app == scenario.EXPORTER.name:
                return
            taken = {m["evicted"] for m in self.moves}
            evicted = next(
                (d for d in self.evicted.values() if d["app"] == app and d["pod"] not in taken),
                None,
            )
            move = {
                "app": app,
                "evicted": evicted["pod"] if evicted else "",
                "replacement": f"{scenario.NAMESPACE}/{name}",
                "from": evicted["from"] if evicted else "",
                "to": node,
                "descheduler_pick": evicted["to"] if evicted else "",
            }
            self.moves.append(move)
            self.moved_at = time.time()
        self.say(
            f"  ⇢ kube-scheduler bound {name} (replacement from the ReplicaSet controller) to "
            f"{node}; its process runs there now"
        )

    # -- the end ----------------------------------------------------------------------

    def summary(
        self, nodes: list[view.NodeView], cooled: bool, stayed_cool: bool, elapsed: float
    ) -> dict[str, Any]:
        after = {n.name: n.cpu_percent for n in nodes}
        self.say("\n── summary " + "─" * 66)
        for node in nodes:
            self.say(
                f"  {node.name}: cpu {self.before.get(node.name, 0):5.1f}% → {after[node.name] or 0:5.1f}%"
            )
        evicted = [d for d in self.decisions if d["decision"] == "evicted"]
        refused = [d for d in self.decisions if d["decision"] == "refused"]
        self.say(
            f"  evictions: {', '.join(d['pod'] + ' (from ' + d['from'] + ')' for d in evicted) or 'none'}"
        )
        self.say(
            f"  placements by kube-scheduler ({self.scheduler}): "
            f"{', '.join(m['replacement'] + ' → ' + m['to'] for m in self.moves) or 'none'}"
        )
        self.say(
            f"  refused (PDB and others): {', '.join(sorted({d['pod'] for d in refused})) or 'none'}"
        )
        self.say(
            f"  {'n1 cooled below the high mark' if cooled else 'n1 did NOT cool within the time limit'}"
            f" — {elapsed:.0f}s, load from {self.mode} processes"
        )
        return {
            "mode": self.mode,
            "scheduler": self.scheduler,
            "cooled": cooled,
            "stayed_cool": cooled and stayed_cool,
            "before": self.before,
            "after": after,
            "decisions": self.decisions,
            "moves": self.moves,
            "seconds": round(elapsed, 1),
            "workdir": str(self.workdir),
            "run_id": self.run_id,
        }

    def close_trees(self) -> None:
        self.stop.set()
        for tree in self.trees.values():
            tree.close()


def _parse_time(text: str) -> float:
    import datetime as dt

    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


class ModeError(ValueError):
    """The nodes asked for cannot run here; the message says why."""


def choose_mode(
    requested: str, scheduler: str, probe: Any = realnodes.probe
) -> tuple[realnodes.Setup | None, str]:
    """(the real-node setup, or None for process-based nodes; the line saying which and why)."""
    if requested == "processes":
        return None, "mode: process-based nodes (asked for with --nodes processes)"
    if scheduler != "nodeqos":
        if requested == "real":
            raise ModeError("--scheduler default is shown on process-based nodes only")
        return None, "mode: process-based nodes (--scheduler default is shown on them only)"
    found = probe()
    if isinstance(found, str):
        if requested == "real":
            raise ModeError(f"--nodes real: {found}")
        return None, f"mode: process-based nodes, the demo playing the kubelet, because {found}"
    return found, (
        "mode: real nodes (kubelet + containerd per node, from hack/node-setup.sh; the nodeqos "
        "image from hack/node-image.sh): the demo plays no part of Kubernetes"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make demo", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--timeout", type=float, default=150.0, help="give up after this many seconds"
    )
    parser.add_argument("--summary-json", type=Path, help="also write the summary here")
    parser.add_argument(
        "--scheduler",
        choices=("nodeqos", "default"),
        default="nodeqos",
        help="kube-scheduler with the nodeqos extender (default), or its default profile only",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="after n1 cools, watch this many seconds more (it must stay cool)",
    )
    parser.add_argument(
        "--nodes",
        choices=("auto", "real", "processes"),
        default="auto",
        help="real kubelets when the machine can run them (auto), always (real), or "
        "process-based nodes where the demo plays the kubelet (processes)",
    )
    parser.add_argument(
        "--scenario",
        choices=("all", "placement", "colocation"),
        default="all",
        help="on real nodes: the placement loop, then colocation (all), or one of them; "
        "process-based nodes run placement only",
    )
    parser.add_argument(
        "--explain-mode",
        action="store_true",
        help="print which nodes the demo would run on, and why, then exit",
    )
    parser.add_argument(
        "--keep-logs",
        action="store_true",
        help="keep the work directory (every process's log) and print where it is",
    )
    args = parser.parse_args(argv)
    try:
        setup, mode_line = choose_mode(
            "real" if args.scenario == "colocation" and args.nodes == "auto" else args.nodes,
            args.scheduler,
        )
    except ModeError as err:
        parser.error(f"{err} (--scenario colocation runs on real nodes only)")
    if setup is None and args.scenario == "colocation":
        parser.error("--scenario colocation runs on real nodes only")
    print(mode_line, flush=True)
    if setup is None and args.scenario == "all":
        print("the colocation scenario needs real nodes: running the placement loop only")
    if args.explain_mode:
        return 0
    signal.signal(signal.SIGTERM, _interrupt)
    workdir = Path(tempfile.mkdtemp(prefix="nodeqos-demo-"))
    try:
        with contextlib.ExitStack() as stack:
            if args.keep_logs:
                stack.callback(lambda: print(f"logs kept in {workdir}"))
            else:
                stack.callback(lambda: __import__("shutil").rmtree(workdir, ignore_errors=True))
            if setup is not None:
                scenarios = realnodes.SCENARIOS if args.scenario == "all" else (args.scenario,)
                summary = realnodes.run(
                    setup, workdir, timeout=max(args.timeout, 240.0), scenarios=scenarios
                )
                summary["stayed_cool"] = summary["ok"]
            else:
                summary = Demo(
                    workdir, timeout=args.timeout, scheduler=args.scheduler, settle=args.settle
                ).run(stack)
    except KeyboardInterrupt:
        print("\ninterrupted: everything stopped and removed", file=sys.stderr)
        return 130
    except (controlplane.ControlPlaneError, localnodes.NodeError, TimeoutError) as err:
        print(f"demo: {err}", file=sys.stderr)
        return 1
    if args.summary_json:
        args.summary_json.write_text(json.dumps(summary, indent=2))
    print("demo finished; every process and cgroup it made is gone")
    return 0 if summary["stayed_cool"] else 1


if __name__ == "__main__":
    sys.exit(main())
