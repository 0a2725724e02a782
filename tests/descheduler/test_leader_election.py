"""Two real descheduler processes, one Lease: one leads, the other takes over after kill -9.

Short lease timings (3s / 2s / 0.5s) keep the test well under 30 seconds. The
leader is read from the Lease (holderIdentity is hostname_pid_uuid) and
cross-checked on each process's /healthz and /metrics.
"""

from __future__ import annotations

import json
import pathlib
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import pytest

from kube import rest
from testbed import controlplane
from tests.descheduler.test_cli_once import descheduler_command
from tests.waiting import eventually

pytestmark = [pytest.mark.controlplane, pytest.mark.slow]

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/nodeqos-descheduler"
CONFIG = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
deschedulingInterval: 1s
leaderElection:
  leaderElect: true
  leaseDuration: 3s
  renewDeadline: 2s
  retryPeriod: 0.5s
  resourceName: nodeqos-descheduler
  resourceNamespace: kube-system
profiles:
- name: p
"""
SERVING = re.compile(r"serving /metrics and /healthz on (http://\S+)")


@dataclass
class Replica:
    proc: subprocess.Popen[bytes]
    log_path: pathlib.Path
    log: IO[bytes]
    url: str = ""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")

    def serving(self) -> str:
        match = SERVING.search(self.logs())
        if match is None and self.proc.poll() is not None:
            raise AssertionError(f"descheduler {self.pid} exited early:\n{self.logs()}")
        return match.group(1) if match else ""

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def health(self) -> dict[str, Any]:
        status, body = self.get("/healthz")
        parsed: dict[str, Any] = json.loads(body)
        parsed["status"] = status
        return parsed

    def metric(self, line_start: str) -> str | None:
        _, body = self.get("/metrics")
        return next((line for line in body.splitlines() if line.startswith(line_start)), None)


@pytest.fixture
def replicas(
    private_control_plane: controlplane.ControlPlane, tmp_path: pathlib.Path
) -> Iterator[list[Replica]]:
    config_file = tmp_path / "config.yaml"
    config_file.write_text(CONFIG)
    started: list[Replica] = []
    for n in range(2):
        log_path = tmp_path / f"replica-{n}.log"
        log = log_path.open("wb")
        proc = subprocess.Popen(
            [
                *descheduler_command(),
                "--config",
                str(config_file),
                "--kubeconfig",
                str(private_control_plane.kubeconfig),
                "--metrics-addr",
                "127.0.0.1:0",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        started.append(Replica(proc, log_path, log))
    try:
        for replica in started:
            replica.url = eventually(replica.serving, f"replica {replica.pid} to serve", 20)
        yield started
    finally:
        for replica in started:
            if replica.proc.poll() is None:
                replica.proc.kill()
            replica.proc.wait(10)
            replica.log.close()


def holder_pid(client: rest.Rest) -> int | None:
    try:
        lease = client.get(LEASE)
    except rest.ApiError as err:
        if err.not_found:
            return None
        raise
    holder = lease["spec"].get("holderIdentity") or ""
    parts = holder.rsplit("_", 2)
    return int(parts[1]) if len(parts) == 3 else None


def test_one_leader_and_a_fast_takeover_after_kill_9(
    private_control_plane: controlplane.ControlPlane, replicas: list[Replica]
) -> None:
    """Exactly one replica leads and cycles; kill -9 it and the other leads within the lease."""
    client = rest.Rest.from_kubeconfig(private_control_plane.kubeconfig, qps=0)
    pids = {r.pid: r for r in replicas}
    leader_pid = eventually(lambda: holder_pid(client), "a leader", 15)
    assert leader_pid in pids
    leader = pids[leader_pid]
    (follower,) = (r for r in replicas if r is not leader)

    def settled() -> bool:
        leading = leader.health()["components"]["leader-election"]["detail"]
        following = follower.health()["components"]["leader-election"]["detail"]
        return leading.startswith("leader (") and following.startswith("follower (")

    eventually(settled, "/healthz to show one leader and one follower", 5)
    for replica in replicas:  # a follower is healthy too, once its caches synced
        eventually(lambda r=replica: r.health()["status"] == 200, "a healthy replica", 10)
        assert replica.health()["components"]["informers"]["ready"] is True
    assert leader.metric("nodeqos_descheduler_leader ") == "nodeqos_descheduler_leader 1.0"
    assert follower.metric("nodeqos_descheduler_leader ") == "nodeqos_descheduler_leader 0.0"
    eventually(
        lambda: leader.metric('nodeqos_descheduler_cycles_total{result="skipped"}'),
        "the leader to run a cycle",
        5,
    )
    assert follower.metric("nodeqos_descheduler_cycles_total{") is None, "a follower cycled"
    assert leader.metric("nodeqos_descheduler_build_info{") is not None

    leader.proc.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    eventually(lambda: holder_pid(client) == follower.pid, "the follower to take over", 10)
    took = time.monotonic() - killed_at
    assert took < 3.0 + 2.0, f"takeover took {took:.1f}s (lease 3s)"
    eventually(
        lambda: follower.metric("nodeqos_descheduler_leader ") == "nodeqos_descheduler_leader 1.0",
        "the new leader's gauge",
        3,
    )
    eventually(
        lambda: follower.metric('nodeqos_descheduler_cycles_total{result="skipped"}'),
        "the new leader to cycle",
        5,
    )

    follower.proc.send_signal(signal.SIGTERM)  # clean shutdown gives the lease up
    assert follower.proc.wait(10) == 0, follower.logs()
    assert client.get(LEASE)["spec"].get("holderIdentity", "") == ""
    assert "descheduler stopped" in follower.logs()
