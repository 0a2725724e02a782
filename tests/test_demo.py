"""The main job, `make demo`, end to end on the real scheduler and controllers.

The demo runs the real kube-scheduler and kube-controller-manager; nodeqos
evicts from the hot node and, through the scheduler extender, the real
scheduler places the replacements on cool nodes. Run with the plain default
scheduler, the same story puts a replacement back on the hot node: that is the
value the extender adds, shown on the real components.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
HIGH = 45.0

pytestmark = [pytest.mark.controlplane, pytest.mark.slow]


def run_demo(tmp_path: Path, *args: str, timeout: float = 420) -> tuple[int, dict[str, Any], str]:
    summary_file = tmp_path / "summary.json"
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "hack" / "demo"),
            "--nodes",
            "processes",  # the real-node mode is tests/test_demo_mode.py's and tests/e2e's
            "--summary-json",
            str(summary_file),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=REPO,
    )
    output = done.stdout[-4000:] + done.stderr[-4000:]
    assert summary_file.exists(), output
    return done.returncode, json.loads(summary_file.read_text()), output


def test_demo_evicts_from_the_hot_node_places_on_cool_nodes_and_cleans_up(tmp_path: Path) -> None:
    """LowNodeLoad evicts batch/report from n1; the real scheduler with the extender puts every
    replacement on a cool node; n1 stays cool; web (PDB) stays; no leftovers."""
    code, summary, output = run_demo(tmp_path, "--settle", "40")
    assert code == 0, output
    evicted = [d for d in summary["decisions"] if d["decision"] == "evicted"]
    assert evicted, output
    assert all(d["plugin"] == "LowNodeLoad" and d["from"] == "n1" for d in evicted)
    assert {d["app"] for d in evicted} <= {"batch", "report"}
    assert not any(d["app"] == "web" for d in evicted), "the PDB-protected pod was evicted"
    # every replacement was made by the ReplicaSet controller and bound off the hot node
    assert summary["moves"], output
    assert {m["app"] for m in summary["moves"]} == {d["app"] for d in evicted}
    assert all(m["to"] in ("n2", "n3") for m in summary["moves"]), summary["moves"]
    assert summary["cooled"] and summary["stayed_cool"]
    assert summary["after"]["n1"] <= HIGH

    run_id, workdir = summary["run_id"], summary["workdir"]
    assert not Path(workdir).exists()
    leftovers = [p for p in Path("/sys/fs/cgroup").glob(f"*/nodeqos-demo-{run_id}")]
    assert leftovers == []
    assert _processes_mentioning(workdir) == []


def test_default_scheduler_sends_a_replacement_back_to_the_hot_node(tmp_path: Path) -> None:
    """Without the extender, kube-scheduler places by requests: a replacement lands on n1 again."""
    _code, summary, output = run_demo(tmp_path, "--scheduler", "default", "--timeout", "120")
    assert summary["scheduler"] == "default"
    assert summary["moves"], output
    assert any(m["to"] == "n1" for m in summary["moves"]), summary["moves"]


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if text.encode() in cmdline:
                found.append(int(entry))
    return found
