"""nodeqos benchmarks, with published numbers in bench/results/.

Each module `bench/<name>.py` has a `main() -> int` that runs its
measurements, writes `<name>.json` through `write_results`, and returns 0 when
every target is met. `python -m bench` runs them all, `python -m bench <name>
...` the ones named (`make bench`).

A run writes to bench/results/local/ (untracked), so running the benchmarks
leaves the tree clean; `python -m bench --publish ...` writes the tracked
bench/results/<name>.json instead, which is how docs/benchmarks.md's numbers are
recorded. The choice travels in the environment (PUBLISH_ENV), so a benchmark's
child processes and `python -m bench.<name>` honour it too.
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import psutil

RESULTS_DIR = Path(__file__).resolve().parent / "results"
"""The published results, tracked in git."""
LOCAL_RESULTS_DIR = RESULTS_DIR / "local"
"""Where a run writes unless it publishes; ignored by git."""
PUBLISH_ENV = "NODEQOS_BENCH_PUBLISH"


def results_dir() -> Path:
    """Where this run writes: the published directory only when PUBLISH_ENV is "1"."""
    return RESULTS_DIR if os.environ.get(PUBLISH_ENV) == "1" else LOCAL_RESULTS_DIR


def previous_results(name: str) -> dict[str, Any] | None:
    """The last recorded `<name>.json`: this run's directory first, then the published one."""
    for directory in dict.fromkeys((results_dir(), RESULTS_DIR)):
        try:
            document = json.loads((directory / f"{name}.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            continue
        if isinstance(document, dict):
            return document
    return None


def machine_info() -> dict[str, Any]:
    """Where the numbers come from: enough to compare two runs fairly."""
    freq = psutil.cpu_freq()
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "sqlite": sqlite3.sqlite_version,
        "cpus_logical": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_max_mhz": round(freq.max) if freq and freq.max else None,
        "memory_total_bytes": psutil.virtual_memory().total,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def write_results(name: str, results: dict[str, Any]) -> Path:
    """Write `results` (plus machine info and a timestamp) to `<name>.json` in `results_dir()`."""
    directory = results_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    payload = {
        "benchmark": name,
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine_info(),
        **results,
    }
    path.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n")
    return path
