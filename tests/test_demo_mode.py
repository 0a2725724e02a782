"""`make demo` chooses its nodes: real kubelets when the machine can run them, else
process-based nodes, saying which and why (`--explain-mode` prints the choice and exits)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def explain(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "hack" / "demo"), "--explain-mode", *args],
        capture_output=True,
        text=True,
        timeout=600,  # a cold machine builds the kubelet and the image first
        check=False,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )


def test_without_the_node_setup_it_falls_back_saying_why(tmp_path: Path) -> None:
    """No kubelet where NODEQOS_NODE_BIN points: process-based nodes, naming the missing binary."""
    done = explain(env={"NODEQOS_NODE_BIN": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("mode: process-based nodes, the demo playing the kubelet"), done
    assert f"missing node binaries: {tmp_path}/kubelet" in done.stdout
    assert "hack/node-setup.sh" in done.stdout


def test_asking_for_real_nodes_that_cannot_run_is_a_usage_error(tmp_path: Path) -> None:
    """--nodes real without the setup exits 2 with the reason, rather than pretending."""
    done = explain("--nodes", "real", env={"NODEQOS_NODE_BIN": str(tmp_path)})
    assert done.returncode == 2
    assert "--nodes real: the node setup is unavailable: missing node binaries" in done.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(["--nodes", "processes"], "asked for with --nodes processes", id="asked"),
        pytest.param(["--scheduler", "default"], "--scheduler default", id="default-scheduler"),
    ],
)
def test_process_mode_when_asked_or_implied(args: list[str], expected: str) -> None:
    """--nodes processes, and the default-scheduler story, run on process-based nodes."""
    done = explain(*args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("mode: process-based nodes") and expected in done.stdout


@pytest.mark.slow
def test_real_nodes_when_the_machine_has_them() -> None:
    """Here (root, hack/node-setup.sh and hack/node-image.sh work): the real-node mode."""
    if os.geteuid() != 0:
        pytest.fail("run as root: the real-node mode needs it (hack/node-setup.sh)")
    done = explain()
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("mode: real nodes"), done.stdout


@pytest.mark.parametrize(
    "args",
    [
        pytest.param([], id="auto"),
        pytest.param(["--nodes", "processes"], id="processes"),
    ],
)
def test_colocation_without_real_nodes_is_a_usage_error(tmp_path: Path, args: list[str]) -> None:
    """--scenario colocation where real nodes cannot run (or are refused) exits 2 saying why."""
    done = explain("--scenario", "colocation", *args, env={"NODEQOS_NODE_BIN": str(tmp_path)})
    assert done.returncode == 2, done
    assert "--scenario colocation runs on real nodes only" in done.stderr


def test_all_scenarios_on_process_nodes_say_colocation_is_left_out(tmp_path: Path) -> None:
    """Without real nodes, the default (all) runs the placement loop and says colocation needs them."""
    done = explain(env={"NODEQOS_NODE_BIN": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert "the colocation scenario needs real nodes" in done.stdout
