"""The main job, `make demo`, end to end: the hot node's pod moves, the PDB holds, nothing is left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.controlplane, pytest.mark.slow]


def test_demo_evicts_from_the_hot_node_and_cleans_up(tmp_path: Path) -> None:
    """LowNodeLoad evicts batch/report pods from n1 through the Eviction API; web (PDB) stays; no leftovers."""
    summary_file = tmp_path / "summary.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "hack" / "demo"), "--summary-json", str(summary_file)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads(summary_file.read_text())
    evicted = [d for d in summary["decisions"] if d["decision"] == "evicted"]
    assert evicted, done.stdout
    assert all(d["plugin"] == "LowNodeLoad" and d["from"] == "n1" for d in evicted)
    assert {d["pod"] for d in evicted} <= {"demo/batch-0", "demo/report-0"}
    assert not any(d["pod"].startswith("demo/web-") for d in evicted), (
        "the PDB-protected pod was evicted"
    )
    assert summary["cooled"] and summary["after"]["n1"] <= 45.0
    # each replacement went where the descheduler said (moves and Events may interleave)
    assert {m["evicted"]: m["to"] for m in summary["moves"]} == {
        d["pod"].split("/")[1]: d["to"] for d in evicted
    }

    run_id, workdir = summary["run_id"], summary["workdir"]
    assert not Path(workdir).exists()
    leftovers = [p for p in Path("/sys/fs/cgroup").glob(f"*/nodeqos-demo-{run_id}")]
    assert leftovers == []
    assert _processes_mentioning(workdir) == []


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
