"""The nodeqos demo: measured usage drives a real eviction, end to end. Run: `make demo`.

1. A real local control plane (etcd + kube-apiserver), the CRDs, and the RBAC
   and descheduler ConfigMap from deploy/.
2. Three nodes with pods bound to them; n1 runs hot. In each pod's cgroup a
   real busy process (or, without a writable cgroup v1, a load generator).
3. One real `nodeqos-agent` per node, in cluster mode under its ServiceAccount,
   publishing the node's NodeMetric.
4. A real `nodeqos-descheduler` with a LowNodeLoad profile, under its own
   ServiceAccount, evicting through the Eviction API (the PDB holds).
5. The demo plays scheduler, ReplicaSet controller and kubelet: the evicted pod's
   replacement is bound to the node the descheduler intended and its process
   moves there, so the next NodeMetric shows n1 cooled.

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

import scenario
import view
import workload
import yaml

from kube import controlplane, localcluster, quantity, rest

REPO = Path(__file__).resolve().parents[2]
HIGH, LOW = 45.0, 30.0
TOWARDS = re.compile(r"from node (\S+) towards node (\S+) by (\S+?)(?:,|:)")


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
    def __init__(self, workdir: Path, *, timeout: float, out: Any = sys.stdout) -> None:
        self.workdir = workdir
        self.timeout = timeout
        self.out = out
        self.run_id = uuid.uuid4().hex[:8]
        self.trees: dict[str, workload.NodeTree] = {}
        self.procs: list[Any] = []
        self.intended: dict[str, str] = {}  # evicted pod name -> node the descheduler chose
        self.decisions: list[dict[str, str]] = []
        self.seen_events: set[str] = set()
        self.moves: list[dict[str, str]] = []
        self.before: dict[str, float] = {}
        self.moved_at: float | None = None
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    # -- set-up ----------------------------------------------------------------------

    def run(self, stack: contextlib.ExitStack) -> dict[str, Any]:
        started = time.monotonic()
        plane = controlplane.ControlPlane()
        stack.callback(plane.stop)
        plane.start()
        self.say(
            f"control plane up at {plane.url} ({time.monotonic() - started:.1f}s): etcd + kube-apiserver, CRDs installed"
        )
        self.admin = rest.Rest.from_kubeconfig(plane.kubeconfig, qps=0)
        for manifest in ("daemonset.yaml", "descheduler.yaml"):
            for doc in yaml.safe_load_all((REPO / "deploy" / manifest).read_text()):
                if doc and doc["kind"] not in ("DaemonSet", "Deployment"):
                    localcluster.apply(self.admin, doc)
        self.say("applied RBAC and the descheduler ConfigMap from deploy/")
        scenario.create_cluster(self.admin)

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
        for spec in scenario.WORKLOAD:
            pod = scenario.start_pod(self.admin, spec)
            self.trees[spec.node].add_pod(
                pod["metadata"]["uid"], scenario.container_id(pod), spec.millicores
            )
        scenario.protect_web(self.admin)
        self.say(
            f"cluster: nodes {', '.join(scenario.NODES)} (1 CPU, 16Gi each); "
            f"{len(scenario.WORKLOAD)} pods; PDB web minAvailable=2"
        )

        kubelet = threading.Thread(target=self.kubelet_loop, name="demo-kubelet", daemon=True)
        kubelet.start()
        stack.callback(self.stop.set)

        agent = plane.service_account("nodeqos-system", "nodeqos-agent", create=False)
        for node in scenario.NODES:
            tree = self.trees[node]
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
        self.say("started 3 nodeqos-agent processes (cluster mode, ServiceAccount nodeqos-agent)")

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

    # -- the loop ----------------------------------------------------------------------

    def watch(self, started: float) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        last_shown: dict[str, str] = {}
        cooled = False
        while time.monotonic() < deadline and not cooled:
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
            if (
                moved_at is not None
                and fresh
                and _parse_time(fresh) > moved_at + 20
                and (hot.cpu_percent or 100) <= HIGH
            ):
                cooled = True
        return self.summary(nodes, cooled, time.monotonic() - started)

    def node_view(self, name: str, metric: dict[str, Any] | None) -> view.NodeView:
        pods = len(self.trees[name].pods)
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
                with self.lock:
                    if target:
                        self.intended[pod] = target
                self.decisions.append(
                    {
                        "pod": f"{scenario.NAMESPACE}/{pod}",
                        "decision": "evicted",
                        "plugin": plugin,
                        "from": source,
                        "to": target,
                        "message": message,
                    }
                )
                self.say(f"  ⇢ evicted {pod} from {source} towards {target or '?'} — {message}")
            else:
                self.decisions.append(
                    {
                        "pod": f"{scenario.NAMESPACE}/{pod}",
                        "decision": "refused",
                        "message": message,
                    }
                )
                self.say(f"  ✗ not evicted {pod} — {message}")

    def kubelet_loop(self) -> None:
        """Play the kubelet, ReplicaSet controller and scheduler for evicted pods."""
        last = time.monotonic()
        while not self.stop.wait(0.5):
            now = time.monotonic()
            for tree in self.trees.values():
                tree.advance(now - last)
                tree.write_proc()
            last = now
            try:
                self.reconcile_evictions()
            except (rest.ApiError, rest.ApiUnavailable) as err:
                print(f"demo kubelet: {err}", file=sys.stderr)

    def reconcile_evictions(self) -> None:
        pods = self.admin.get(rest.object_path("", "v1", "pods", namespace=scenario.NAMESPACE))[
            "items"
        ]
        for pod in pods:
            meta = pod["metadata"]
            if not meta.get("deletionTimestamp"):
                continue
            with self.lock:
                target = self.intended.get(meta["name"])
            if target is None:
                continue  # the descheduler's Event names the destination; it follows the eviction
            source = pod["spec"]["nodeName"]
            self.trees[source].remove_pod(meta["uid"])
            localcluster.finish_terminating(self.admin, scenario.NAMESPACE)
            spec = next(s for s in scenario.WORKLOAD if meta["name"].startswith(s.name))
            name = f"{spec.name}-r{len(self.moves) + 1}"
            replacement = scenario.start_pod(self.admin, spec, name=name, node=target)
            self.trees[target].add_pod(
                replacement["metadata"]["uid"], scenario.container_id(replacement), spec.millicores
            )
            with self.lock:
                self.moves.append(
                    {"evicted": meta["name"], "replacement": name, "from": source, "to": target}
                )
                self.moved_at = time.time()
            self.say(
                f"  ⇢ scheduler/kubelet: {name} bound to {target}, its process moved from {source}"
            )

    # -- the end ----------------------------------------------------------------------

    def summary(self, nodes: list[view.NodeView], cooled: bool, elapsed: float) -> dict[str, Any]:
        after = {n.name: n.cpu_percent for n in nodes}
        self.say("\n── summary " + "─" * 66)
        for node in nodes:
            self.say(
                f"  {node.name}: cpu {self.before.get(node.name, 0):5.1f}% → {after[node.name] or 0:5.1f}%"
            )
        evicted = [d for d in self.decisions if d["decision"] == "evicted"]
        refused = [d for d in self.decisions if d["decision"] == "refused"]
        self.say(
            f"  evictions: {', '.join(d['pod'] + ' (' + d['from'] + '→' + d['to'] + ')' for d in evicted) or 'none'}"
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
            "cooled": cooled,
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make demo", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--timeout", type=float, default=150.0, help="give up after this many seconds"
    )
    parser.add_argument("--summary-json", type=Path, help="also write the summary here")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    workdir = Path(tempfile.mkdtemp(prefix="nodeqos-demo-"))
    try:
        with contextlib.ExitStack() as stack:
            stack.callback(lambda: __import__("shutil").rmtree(workdir, ignore_errors=True))
            summary = Demo(workdir, timeout=args.timeout).run(stack)
    except KeyboardInterrupt:
        print("\ninterrupted: everything stopped and removed", file=sys.stderr)
        return 130
    except controlplane.ControlPlaneError as err:
        print(f"demo: {err}", file=sys.stderr)
        return 1
    if args.summary_json:
        args.summary_json.write_text(json.dumps(summary, indent=2))
    print("demo finished; every process and cgroup it made is gone")
    return 0 if summary["cooled"] else 1


if __name__ == "__main__":
    sys.exit(main())
