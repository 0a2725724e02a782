"""`nodeqos-agent`: flag validation (exit 2 with a reason) and --print-nodemetric end to end."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from agent import cli
from cgroups import CgroupVersion, Driver
from tests.agent.builders import SCENARIO_A_MEMORY, UID_B, UID_BE, UID_G, scenario_a_pods
from tests.cgroupfs_builder import write_meminfo, write_pod_tree, write_proc_stat

GIB_KB = 1024 * 1024
EMPTY_USAGE: dict[str, dict[str, str]] = {name: {} for name in ("avg", "p50", "p90", "p95", "p99")}


@pytest.fixture
def fake_host(tmp_path: Path) -> tuple[Path, Path]:
    """A v2/systemd cgroup tree with the three scenario pods, and a /proc."""
    tree = write_pod_tree(tmp_path / "cgroup", CgroupVersion.V2, Driver.SYSTEMD, scenario_a_pods())
    proc = tmp_path / "proc"
    write_proc_stat(proc, user=1000, system=500, idle=9000)
    write_meminfo(proc, total_kb=16 * GIB_KB, available_kb=12 * GIB_KB)
    return tree.root, proc


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli.build_command(), list(args))
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["--collect-interval", "1x"], "Invalid value for '--collect-interval'", id="interval"
        ),
        pytest.param(["--collect-interval", "0s"], "greater than zero", id="zero-interval"),
        pytest.param(["--run-for", "soon"], "not a duration", id="run-for"),
        pytest.param(
            ["--feature-gates", "Nope=true"], "known gates: BECPUEvict, BECPUIdle", id="gate"
        ),
        pytest.param(
            ["--feature-gates", "CPUBurst=maybe"], "is not true or false", id="gate-value"
        ),
        pytest.param(["--metrics-addr", "9316"], "expected host:port", id="addr"),
        pytest.param(["--cgroup-driver", "docker"], "'docker' is not one of", id="driver"),
        pytest.param(["--kubeconfig", "/no/such/file"], "does not exist", id="kubeconfig"),
        pytest.param(
            ["--reconcile-interval-seconds", "-1"],
            "'--reconcile-interval-seconds': -1.0 is not in the range x>=0",
            id="plugin-flag",
        ),
        pytest.param(
            ["--qos-extension-plugins", "Nope=true"],
            "--qos-extension-plugins: unknown feature gate 'Nope'; known gates: none",
            id="extension-gate",
        ),
        pytest.param(
            ["--qos-extension-plugins", "Nope"], "is not Name=true|false", id="extension-syntax"
        ),
    ],
)
def test_bad_flag_values_exit_2_saying_why(args: list[str], message: str) -> None:
    """Every malformed flag value is a usage error (exit 2) naming the problem."""
    code, output = _invoke("--standalone", *args)
    assert code == 2, output
    assert message in output


def test_host_paths_are_checked_before_running(
    tmp_path: Path, fake_host: tuple[Path, Path]
) -> None:
    """A cgroup root that is no cgroup hierarchy, or a proc root without stat, exits 2."""
    cgroup, proc = fake_host
    code, output = _invoke("--standalone", "--cgroup-root", str(tmp_path), "--proc-root", str(proc))
    assert code == 2 and "--cgroup-root" in output and "neither cgroup.controllers" in output
    code, output = _invoke(
        "--standalone", "--cgroup-root", str(cgroup), "--proc-root", str(tmp_path)
    )
    assert code == 2 and "--proc-root" in output and "no stat file" in output


def test_in_cluster_mode_without_credentials_exits_2(
    tmp_path: Path, fake_host: tuple[Path, Path]
) -> None:
    """Without --standalone the agent needs API credentials; unusable ones exit 2 saying so."""
    cgroup, proc = fake_host
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    code, output = _invoke(
        "--kubeconfig", str(kubeconfig), "--cgroup-root", str(cgroup), "--proc-root", str(proc)
    )
    assert code == 2, output
    assert "Invalid value for --kubeconfig: cannot load API credentials from" in output


def _run_agent(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_bad_flag_in_a_real_process_exits_2() -> None:
    """The installed entry point exits 2 with click's message on a bad value."""
    done = _run_agent("--standalone", "--collect-interval", "fast")
    assert done.returncode == 2
    assert "Invalid value for '--collect-interval'" in done.stderr
    assert "'fast' is not a duration" in done.stderr


@pytest.mark.slow
def test_print_nodemetric_end_to_end(tmp_path: Path, fake_host: tuple[Path, Path]) -> None:
    """--run-for 3s --print-nodemetric prints the NodeMetric status YAML for the tree's pods."""
    cgroup, proc = fake_host
    done = _run_agent(
        "--standalone",
        "--cgroup-root",
        str(cgroup),
        "--proc-root",
        str(proc),
        "--run-for",
        "3s",
        "--collect-interval",
        "500ms",
        "--metrics-addr",
        "127.0.0.1:0",
        "--print-nodemetric",
        env={"XDG_STATE_HOME": str(tmp_path / "state")},
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "state" / "nodeqos" / "metriccache.db").is_file()
    status = yaml.safe_load(done.stdout)
    assert list(status) == ["updateTime", "nodeMetric", "podsMetric"]
    node = status["nodeMetric"]
    assert node["nodeUsage"] == {"resources": {"cpu": "0", "memory": str(4 << 30)}}
    assert set(node["systemUsage"]["resources"]) == {"cpu", "memory"}
    for key in ("aggregatedNodeUsages", "aggregatedSystemUsages"):
        # 3 s of samples cover less than half of any window: present but empty
        assert [a["duration"] for a in node[key]] == ["5m0s", "10m0s", "30m0s"]
        assert all(a["usage"] == EMPTY_USAGE for a in node[key])
    pods = status["podsMetric"]
    assert [p["name"] for p in pods] == sorted([UID_G, UID_B, UID_BE])
    by_uid = {p["name"]: p for p in pods}
    for uid, qos, priority in (
        (UID_G, "LSR", "koord-prod"),
        (UID_B, "LS", "koord-prod"),
        (UID_BE, "BE", "koord-batch"),
    ):
        assert by_uid[uid] == {
            "name": uid,
            "namespace": "unknown",
            "podUsage": {
                "resources": {"cpu": "0", "memory": str(sum(SCENARIO_A_MEMORY[uid].values()))}
            },
            "priority": priority,
            "qos": qos,
        }
    assert "serving /metrics and /healthz on 127.0.0.1:" in done.stderr


def test_running_agent_serves_metrics_and_stops_on_sigterm(
    tmp_path: Path, fake_host: tuple[Path, Path]
) -> None:
    """A running agent answers /healthz and /metrics; SIGTERM ends it cleanly, status printed."""
    cgroup, proc = fake_host
    args = ["--standalone", "--cgroup-root", str(cgroup), "--proc-root", str(proc)]
    args += ["--collect-interval", "200ms", "--print-nodemetric", "--metrics-addr", "127.0.0.1:0"]
    args += ["--metric-cache-path", str(tmp_path / "c.db")]
    with subprocess.Popen(
        [sys.executable, "-m", "agent", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as agent:
        out = _drive(agent)
    assert agent.returncode == 0
    assert len(yaml.safe_load(out)["podsMetric"]) == 3


def _drive(agent: subprocess.Popen[str]) -> str:
    """Check the endpoints of a running agent, then SIGTERM it; its stdout."""
    assert agent.stderr is not None
    try:
        port = None
        for line in agent.stderr:
            if "serving /metrics and /healthz on" in line:
                port = int(line.rsplit(":", 1)[1])
                break
        assert port is not None, "the agent never said where it serves"
        base = f"http://127.0.0.1:{port}"
        health = _poll_healthz(base + "/healthz")
        assert health["components"]["collector"]["ready"] is True
        metrics = _poll_metrics(base + "/metrics", min_rounds=3)  # CPU rates need two
        assert "nodeqos_agent_node_memory_usage_bytes 4.294967296e+09" in metrics
        assert 'nodeqos_agent_collect_duration_seconds_count{collector="pods"}' in metrics
        agent.send_signal(signal.SIGTERM)
        out, _ = agent.communicate(timeout=30)
        return out
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()


def _poll_healthz(url: str) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                body: dict[str, Any] = json.loads(resp.read())
                return body
        except urllib.error.HTTPError as err:
            err.close()
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def _poll_metrics(url: str, *, min_rounds: int) -> str:
    """/metrics once the agent has run `min_rounds` collection rounds."""
    deadline = time.monotonic() + 20
    while True:
        with urllib.request.urlopen(url, timeout=5) as resp:
            body: str = resp.read().decode()
        found = re.search(r"^nodeqos_agent_collect_rounds_total (\S+)$", body, re.M)
        if (found and float(found[1]) >= min_rounds) or time.monotonic() > deadline:
            return body
        time.sleep(0.05)
