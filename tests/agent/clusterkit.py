"""Helpers for the agent's in-cluster tests: a live fake node and the agent as a real process.

    node = LiveNode(tmp_path, node_cpu=1.5)             # fake cgroup v2/systemd tree + /proc
    pods = create_scenario_pods(kube, namespace, "n1")  # Guaranteed, Burstable, BestEffort
    node.add_api_pod(pods[0], cpu=0.5)                  # its cgroups, using 0.5 cores from now on
    with AgentProcess(tmp_path, control_plane.kubeconfig, node, "n1") as agent:
        status = wait_for_report(kube, "n1")

The tree's CPU counters (cgroup `cpu.stat`, `/proc/stat` busy ticks) are a pure
function of time that the agent's own clock renders as each collection round
starts (`tests.agent.livenode`), so a real agent process reading them every
200 ms measures exactly the configured usage, however busy the machine.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent import kinds as agent_kinds
from cgroups import CgroupVersion, Driver, QoSLevel
from kube import rest, slo
from metriccache import MetricCache, Sample, kinds
from testbed import localcluster
from tests.agent import livenode
from tests.agent.builders import HZ
from tests.cgroupfs_builder import FakePod, fake_container, fake_pod, write_meminfo, write_pod_tree
from tests.waiting import eventually

GIB = 1 << 30
NODEMETRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
EMPTY_USAGE: dict[str, dict[str, Any]] = {a: {} for a in ("avg", "p50", "p90", "p95", "p99")}


class LiveNode:
    """A fake cgroup v2 (systemd) node with /proc, its CPU counters a pure function of time.

    What each counter is lives in `spec` (`livenode.write_spec`); an agent run
    by `AgentProcess` renders the counters from its own clock as it collects.
    """

    def __init__(self, tmp_path: Path, *, node_cpu: float, total_gib: int = 16, used_gib: int = 4):
        self.tree = write_pod_tree(tmp_path / "cgroup", CgroupVersion.V2, Driver.SYSTEMD)
        self.proc = tmp_path / "proc"
        self.proc.mkdir(parents=True, exist_ok=True)
        self.spec = tmp_path / "livenode.json"
        write_meminfo(
            self.proc, total_kb=total_gib << 20, available_kb=(total_gib - used_gib) << 20
        )
        stat = self.proc / "stat"
        stat.unlink(missing_ok=True)  # rewritten in place from now on
        self._counters: dict[str, livenode.Counter] = {
            "node": livenode.Counter(str(stat), "proc_stat", node_cpu, 10**6, time.monotonic(), HZ)
        }
        self._publish()

    @property
    def cgroup_root(self) -> Path:
        return self.tree.root

    def add_api_pod(self, pod: Mapping[str, Any], *, cpu: float, **memory: int) -> FakePod:
        """Write the cgroups of an API pod (UID, QoS class, container IDs) using `cpu` cores."""
        meta, status = pod["metadata"], pod["status"]
        level = QoSLevel.from_qos_class(status["qosClass"])
        ids = [s["containerID"].split("://", 1)[1] for s in status["containerStatuses"]]
        fake = fake_pod(
            meta["uid"],
            qos=level,
            containers=[fake_container(cid, **memory) for cid in ids],
            **memory,
        )
        self.tree.add_pod(fake)
        now = time.monotonic()
        dirs = [self.tree.pod_dir(fake)] + [
            self.tree.container_dir(fake, c) for c in fake.containers
        ]
        for rel in dirs:
            path = self.tree.root / rel / "cpu.stat"
            path.unlink()  # the builder's static content; rewritten in place from now on
            self._counters[str(rel)] = livenode.Counter(
                str(path), "cpu_stat_v2", cpu, 10**9, now, 10**9
            )
        self._publish()
        return fake

    def set_node_cpu(self, cores: float) -> None:
        """The node uses `cores` from now on."""
        self._counters["node"] = self._counters["node"].moved_to(cores, time.monotonic())
        self._publish()

    def _publish(self) -> None:
        livenode.render(self._counters.values(), time.monotonic())
        livenode.write_spec(self.spec, self._counters.values())


# -- the cluster side -----------------------------------------------------------------


def scenario_pod(
    name: str,
    node: str,
    *,
    cpu: str | None = None,
    limits: bool = False,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A one-container pod bound to `node`: BestEffort without `cpu`, Guaranteed with `limits`."""
    resources: dict[str, Any] = {}
    if cpu is not None:
        resources["requests"] = {"cpu": cpu, "memory": "256Mi"}
        if limits:
            resources["limits"] = dict(resources["requests"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        },
    }


def create_running_pod(kube: rest.Rest, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """Create a bound pod and report it Running with container IDs, as its kubelet would."""
    created = kube.create(f"/api/v1/namespaces/{namespace}/pods", dict(body))
    return localcluster.mark_running(kube, created)


def nodemetric(kube: rest.Rest, node: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = kube.get(f"{NODEMETRICS}/{node}")
    except rest.ApiError as err:
        if err.not_found:
            return None
        raise
    return found


def create_nodemetric(kube: rest.Rest, node: str, policy: Mapping[str, Any]) -> None:
    kube.create(
        NODEMETRICS,
        {
            "apiVersion": slo.API_VERSION,
            "kind": "NodeMetric",
            "metadata": {"name": node},
            "spec": {"metricCollectPolicy": dict(policy)},
        },
    )


def wait_for_report(
    kube: rest.Rest, node: str, *, after: str | None = None, timeout: float = 20.0
) -> dict[str, Any]:
    """The NodeMetric once its status.updateTime exists and differs from `after`."""

    def fresh() -> dict[str, Any] | None:
        obj = nodemetric(kube, node)
        updated = ((obj or {}).get("status") or {}).get("updateTime")
        return obj if updated is not None and updated != after else None

    found: dict[str, Any] = eventually(fresh, f"a NodeMetric report of {node}", timeout)
    return found


def cleanup_cluster_objects(kube: rest.Rest, node: str) -> None:
    """Delete the node, its NodeMetric and NodeSLO (tests share one control plane)."""
    for path in (
        f"/api/v1/nodes/{node}",
        f"{NODEMETRICS}/{node}",
        f"/apis/slo.koordinator.sh/v1alpha1/nodeslos/{node}",
    ):
        with contextlib.suppress(rest.ApiError, rest.ApiUnavailable):
            kube.delete(path)


# -- the metric cache ------------------------------------------------------------------


def seed_cache(
    path: Path,
    *,
    seconds: float,
    node_cpu: float,
    node_memory: float,
    system_cpu: float,
    system_memory: float,
    end: float | None = None,
) -> float:
    """Write `seconds` of 1 Hz node and system samples ending at `end` (now); returns `end`."""
    end = time.time() if end is None else end
    cache = MetricCache.open(path, kinds=agent_kinds.registry(), flush_interval=None)
    try:
        samples = []
        for i in range(int(seconds) + 1):
            t = end - seconds + i
            samples += [
                Sample(kinds.NODE_CPU_USAGE, {}, t, node_cpu),
                Sample(kinds.NODE_MEMORY_USAGE, {}, t, node_memory),
                Sample(kinds.SYSTEM_CPU_USAGE, {}, t, system_cpu),
                Sample(kinds.SYSTEM_MEMORY_USAGE, {}, t, system_memory),
            ]
        cache.append(samples)
        cache.flush()
    finally:
        cache.close()
    return end


# -- the agent process -----------------------------------------------------------------

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # in the child between fork and exec, as testbed.controlplane does
    os.setsid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class AgentProcess:
    """The agent in cluster mode over a `LiveNode`, its clock rendering the node's counters.

    `python -m tests.agent.livenode`: `nodeqos-agent` with a `livenode.LiveClock`.
    stderr goes to a log file.
    """

    def __init__(
        self,
        tmp_path: Path,
        kubeconfig: Path,
        node: LiveNode,
        node_name: str,
        *,
        cache_path: Path | None = None,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.log_path = tmp_path / f"agent-{node_name}-{time.monotonic_ns()}.log"
        self.cache_path = cache_path or tmp_path / "state" / "metriccache.db"
        self.args = [
            sys.executable,
            "-m",
            "tests.agent.livenode",
            str(node.spec),
            "--node-name",
            node_name,
            "--kubeconfig",
            str(kubeconfig),
            "--cgroup-root",
            str(node.cgroup_root),
            "--proc-root",
            str(node.proc),
            "--collect-interval",
            "200ms",
            "--metric-cache-path",
            str(self.cache_path),
            "--metrics-addr",
            "127.0.0.1:0",
            *extra,
        ]
        self.proc: subprocess.Popen[bytes] | None = None
        self._port: int | None = None

    def start(self) -> AgentProcess:
        self._port = None
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                preexec_fn=_die_with_parent,  # no agent outlives a killed test run
            )
        return self

    def __enter__(self) -> AgentProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def port(self) -> int:
        if self._port is None:

            def find() -> int | None:
                assert self.alive, f"the agent exited:\n{self.log()[-3000:]}"
                found = re.findall(
                    r"serving /metrics and /healthz on 127\.0\.0\.1:(\d+)", self.log()
                )
                return int(found[-1]) if found else None

            self._port = int(eventually(find, "the agent's metrics port", 30))
        return self._port

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                return int(r.status), r.read().decode()
        except urllib.error.HTTPError as err:  # /healthz answers 503 while not ready
            return int(err.code), err.read().decode()

    def metric(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        """One sample of the agent's /metrics, parsed from the text format."""
        want = ",".join(f'{k}="{v}"' for k, v in sorted((labels or {}).items()))
        wanted = f"{name}{{{want}}}" if want else name
        for line in self.get("/metrics")[1].splitlines():
            key, _, value = line.rpartition(" ")
            if key == wanted:
                return float(value)
        return None

    def kill9(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        return self.proc.wait(10)

    def terminate(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)
