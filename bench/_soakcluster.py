"""The soak's cluster: a local control plane behind latency proxies (one per daemon, so
a partition can cut one off and each one's requests can be counted), three nodes with
their cgroup trees and agents, two descheduler replicas with leader election, the
scheduler extender with kube-scheduler, and the soak playing kubelet. Used by `bench.soak`."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from bench._chaos import Daemon, LatencyProxy
from extender import local
from kube import rest
from testbed import controlplane, localcluster

REPO = Path(__file__).resolve().parent.parent
NODES = ("n1", "n2", "n3")
NAMESPACE = "soak"
NODE_CPU = "1"
REPORT_INTERVAL = 30  # the agents' minimum (agent.reporter.MIN_REPORT_INTERVAL)
EXPIRATION = 40  # LowNodeLoad's nodeMetricExpirationSeconds in the soak (> report interval)
COLLECT_INTERVAL = 1.0
FLUSH_INTERVAL = 5.0  # the agent's metric cache flush interval
LEASE, RENEW, RETRY = 8.0, 6.0, 1.0
HIGH, LOW = 45, 30
MILLICORES = "soak.nodeqos.io/millicores"
NODEMETRICS = rest.object_path("slo.koordinator.sh", "v1alpha1", "nodemetrics")


def load_workload_module() -> Any:
    """hack/demo/workload.py: the demo's per-node cgroup tree and /proc (script-style module)."""
    path = REPO / "hack" / "demo" / "workload.py"
    spec = importlib.util.spec_from_file_location("nodeqos_demo_workload", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def via_proxy(identity: controlplane.Identity, proxy: LatencyProxy, suffix: str = "") -> Path:
    """A copy of the identity's kubeconfig that talks through the proxy."""
    config = yaml.safe_load(identity.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = proxy.url
    path = identity.kubeconfig.with_suffix(f".proxy{suffix}.kubeconfig")
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def descheduler_config(port: int) -> dict[str, Any]:
    for doc in yaml.safe_load_all((REPO / "deploy" / "descheduler.yaml").read_text()):
        if doc and doc.get("kind") == "ConfigMap":
            config: dict[str, Any] = yaml.safe_load(doc["data"]["descheduler.yaml"])
    config["deschedulingInterval"] = "5s"
    config["metricsBindAddress"] = config["healthzBindAddress"] = f"127.0.0.1:{port}"
    config["leaderElection"].update(
        leaseDuration=f"{LEASE:g}s", renewDeadline=f"{RENEW:g}s", retryPeriod=f"{RETRY:g}s"
    )
    for entry in config["profiles"][0]["pluginConfig"]:
        if entry["name"] == "LowNodeLoad":
            entry["args"].update(
                lowThresholds={"cpu": LOW, "memory": 55},
                highThresholds={"cpu": HIGH, "memory": 80},
                anomalyCondition={"consecutiveAbnormalities": 1},
                nodeMetricExpirationSeconds=EXPIRATION,
                evictableNamespaces={"exclude": ["kube-system", "nodeqos-system"]},
            )
    return config


class SoakCluster:
    """Everything the soak runs; `close()` tears it down."""

    def __init__(self, workdir: Path, *, real: bool) -> None:
        self.workdir = workdir
        self.stack = contextlib.ExitStack()
        self.plane = controlplane.ControlPlane(workdir=workdir / "cp")
        self.stack.callback(self.plane.stop)
        self.plane.start()
        self.proxies: dict[str, LatencyProxy] = {}
        # Through a proxy too: a restarted API server may come back on another port.
        admin = via_proxy(self.plane.admin(), self.proxy("admin"))
        self.admin = rest.Rest.from_kubeconfig(admin, qps=0, timeout=10)
        for manifest in sorted((REPO / "deploy").glob("*.yaml")):
            for doc in yaml.safe_load_all(manifest.read_text()):
                if doc and doc["kind"] not in ("DaemonSet", "Deployment", "Service"):
                    localcluster.apply(self.admin, doc)
        workload = load_workload_module()
        self.real = real and workload.real_cgroups_writable()
        run_id = uuid.uuid4().hex[:8]
        self.trees = {
            n: workload.NodeTree(n, workdir, real=self.real, run_id=run_id) for n in NODES
        }
        self.stack.callback(lambda: [tree.close() for tree in self.trees.values()])
        self.running: dict[str, str] = {}  # pod uid -> node
        self.evictions: list[dict[str, Any]] = []
        self.daemons: dict[str, Daemon] = {}
        self.ports: dict[str, int] = {}
        self._create_cluster()

    # -- set-up -------------------------------------------------------------------------

    def proxy(self, name: str) -> LatencyProxy:
        """The proxy of one client (a daemon, or "admin": the soak itself)."""
        if name not in self.proxies:
            proxy = LatencyProxy(lambda: self.plane.secure_port, name)
            self.stack.callback(proxy.close)
            self.proxies[name] = proxy
        return self.proxies[name]

    def set_delay(self, seconds: float) -> None:
        for proxy in self.proxies.values():
            proxy.delay = seconds

    def cut(self) -> None:
        """Drop every open connection (what a dying API server does to its clients)."""
        for proxy in self.proxies.values():
            proxy.cut()

    def _create_cluster(self) -> None:
        for node in NODES:
            localcluster.register_node(self.admin, node, cpu=NODE_CPU, memory="16Gi")
            self.admin.create(
                NODEMETRICS,
                {
                    "apiVersion": "slo.koordinator.sh/v1alpha1",
                    "kind": "NodeMetric",
                    "metadata": {"name": node},
                    "spec": {
                        "metricCollectPolicy": {
                            # pod usage is the average over this window, reported once it
                            # covers half of it: 60 s lets pods count after 30 s
                            "aggregateDurationSeconds": 60,
                            "reportIntervalSeconds": REPORT_INTERVAL,
                        }
                    },
                },
            )
        self.admin.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        self.owner = self.admin.create(
            rest.object_path("apps", "v1", "replicasets", namespace=NAMESPACE),
            {
                "metadata": {"name": "web"},
                "spec": {
                    "replicas": 0,  # no controller manager runs; the soak plays the owner
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
                    },
                },
            },
        )

    def pod(self, name: str, millicores: int, node: str | None = None) -> dict[str, Any]:
        """A web pod (owned by the ReplicaSet, so evictable); bound to `node` or scheduled."""
        body: dict[str, Any] = {
            "metadata": {
                "name": name,
                "labels": {"app": "web"},
                "annotations": {MILLICORES: str(millicores)},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": "web",
                        "uid": self.owner["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                    }
                ],
                **({"nodeName": node} if node else {}),
            },
        }
        created: dict[str, Any] = self.admin.create(
            rest.object_path("", "v1", "pods", namespace=NAMESPACE), body
        )
        return created

    def start_daemons(self) -> None:
        py = sys.executable
        for node in NODES:
            identity = self.plane.service_account(
                "nodeqos-system", "nodeqos-agent", create=False, node=node
            )
            tree = self.trees[node]
            port = controlplane.free_port()
            self.ports[f"agent-{node}"] = port
            self._daemon(
                f"agent-{node}",
                [
                    py, "-m", "agent", "--node-name", node,
                    "--kubeconfig", str(via_proxy(identity, self.proxy(f"agent-{node}"))),
                    "--cgroup-root", str(tree.cgroup_root), "--proc-root", str(tree.proc_root),
                    "--metric-cache-path", str(self.cache_path(node)),
                    "--collect-interval", f"{COLLECT_INTERVAL:g}s",
                    "--metrics-addr", f"127.0.0.1:{port}",
                ],
            )  # fmt: skip
        extender = self.plane.service_account(
            "nodeqos-system", "nodeqos-scheduler-extender", create=False
        )
        args_file = self.workdir / "loadaware.yaml"
        for doc in yaml.safe_load_all((REPO / "deploy" / "scheduler-extender.yaml").read_text()):
            if doc and doc["kind"] == "ConfigMap":
                args = yaml.safe_load(doc["data"]["loadaware.yaml"])
        args["nodeMetricExpirationSeconds"] = EXPIRATION
        args["usageThresholds"] = {"cpu": HIGH - 5, "memory": 80}
        args_file.write_text(yaml.safe_dump(args))
        port = controlplane.free_port()
        self.ports["extender"] = port
        kubeconfig = via_proxy(extender, self.proxy("extender"))
        self._daemon("extender", local.command(kubeconfig, args_file, port))
        local.wait_ready(port)
        self.plane.start_scheduler(
            local.point_scheduler(REPO / "deploy" / "kube-scheduler" / "extender.yaml", port)
        )
        descheduler = self.plane.service_account(
            "nodeqos-system", "nodeqos-descheduler", create=False
        )
        for replica in ("a", "b"):
            name = f"descheduler-{replica}"
            kubeconfig = via_proxy(descheduler, self.proxy(name), suffix=replica)
            port = controlplane.free_port()
            self.ports[f"descheduler-{replica}"] = port
            config = self.workdir / f"descheduler-{replica}.yaml"
            config.write_text(yaml.safe_dump(descheduler_config(port)))
            self._daemon(
                f"descheduler-{replica}",
                [py, "-m", "descheduler.cli", "--config", str(config), "--kubeconfig", str(kubeconfig)],
            )  # fmt: skip

    def cache_path(self, node: str) -> Path:
        """The agent's metric cache file; outside the node's tree, which `close` removes
        before the soak reads the file back."""
        return self.workdir / "metriccache" / f"{node}.db"

    def _daemon(self, name: str, argv: list[str]) -> None:
        daemon = Daemon(name, argv, self.workdir, cwd=REPO)
        daemon.start()
        self.daemons[name] = daemon
        self.stack.callback(daemon.stop)

    # -- the kubelet's part ----------------------------------------------------------------

    def kubelet_tick(self, elapsed: float) -> None:
        """Advance the fake load, run newly bound pods, finish deletions, note evictions."""
        for tree in self.trees.values():
            tree.advance(elapsed)
            tree.write_proc()
        pods = self.admin.get(rest.object_path("", "v1", "pods", namespace=NAMESPACE))["items"]
        alive = set()
        for pod in pods:
            meta, node = pod["metadata"], pod["spec"].get("nodeName")
            uid = meta["uid"]
            alive.add(uid)
            if meta.get("deletionTimestamp"):
                conditions = (pod.get("status") or {}).get("conditions") or []
                if any(c.get("type") == "DisruptionTarget" for c in conditions) and not any(
                    e["uid"] == uid for e in self.evictions
                ):
                    self.evictions.append(
                        {"uid": uid, "pod": meta["name"], "node": node, "at": time.time()}
                    )
                self._stop_pod(uid)
                continue
            if node and uid not in self.running:
                reported = localcluster.mark_running(self.admin, pod)
                cid = reported["status"]["containerStatuses"][0]["containerID"].split("://")[1]
                millicores = int(meta.get("annotations", {}).get(MILLICORES, "0"))
                if node in self.trees:  # a node without an agent (the "ghost") runs nothing
                    self.trees[node].add_pod(uid, cid, millicores)
                self.running[uid] = node
        localcluster.finish_terminating(self.admin, NAMESPACE)
        for uid in set(self.running) - alive:
            self._stop_pod(uid)

    def _stop_pod(self, uid: str) -> None:
        node = self.running.pop(uid, None)
        if node in self.trees:
            self.trees[node].remove_pod(uid)

    def close(self) -> None:
        self.stack.close()
