"""The interference bench's figures: per-arm summaries, the goal, the table, the plot.

Pure functions over the rounds' records (dicts as written to interference.json),
so the goal and the table are tested without a node.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from bench import _pngplot

BASELINE_ARM = 1
NO_NODEQOS_ARM = 2
NODEQOS_ARMS = (3, 4, 5)
GOAL_NODE_CPU_PERCENT = 60.0
GOAL_P99_RATIO = 1.10
GOAL_P999_RATIO = 1.25
# A latency figure from a run that dropped requests hides them (a timed-out request
# has no latency): above this share of errors an arm's figures do not count.
MAX_ERROR_FRACTION = 0.001


def summarize(records: Sequence[Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
    """Per arm: the median over its rounds of each figure, and p99's spread (max - min)."""
    by_arm: dict[int, list[Mapping[str, Any]]] = {}
    for record in records:
        by_arm.setdefault(int(record["arm"]), []).append(record)
    summary = {}
    for arm, rounds in sorted(by_arm.items()):
        p99s = [float(r["p99_ms"]) for r in rounds]
        summary[arm] = {
            "name": rounds[0]["arm_name"],
            "rounds": len(rounds),
            "p50_ms": round(statistics.median(float(r["p50_ms"]) for r in rounds), 3),
            "p99_ms": round(statistics.median(p99s), 3),
            "p99_spread_ms": round(max(p99s) - min(p99s), 3),
            "p999_ms": round(statistics.median(float(r["p999_ms"]) for r in rounds), 3),
            "node_cpu_percent": round(
                statistics.median(float(r["node_cpu_percent"]) for r in rounds), 1
            ),
            "online_cpu_percent": round(
                statistics.median(float(r["online_cpu_percent"]) for r in rounds), 1
            ),
            "batch_cpu_percent": round(
                statistics.median(float(r["batch_cpu_percent"]) for r in rounds), 1
            ),
            "errors": sum(int(r["errors"]) for r in rounds),
            "requests": sum(int(r["requests"]) for r in rounds),
        }
    return summary


def goal(summary: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
    """The issue's goal, checked per nodeqos arm; `met` when one arm meets all of it."""
    base, plain = summary.get(BASELINE_ARM), summary.get(NO_NODEQOS_ARM)
    if base is None or plain is None:
        return {"met": False, "why": "arms 1 and 2 are both needed", "arms": {}}
    if not _clean(base):
        why = f"arm 1 lost {base['errors']} of {base['requests']} requests: the rate is too high"
        return {"met": False, "why": why, "arms": {}}
    arms: dict[str, Any] = {}
    for number in NODEQOS_ARMS:
        arm = summary.get(number)
        if arm is None:
            continue
        spread = max(arm["p99_spread_ms"], plain["p99_spread_ms"])
        checks = {
            "node_cpu_at_least_60_percent": arm["node_cpu_percent"] >= GOAL_NODE_CPU_PERCENT,
            "p99_within_1_10_of_alone": arm["p99_ms"] <= GOAL_P99_RATIO * base["p99_ms"],
            "p999_within_1_25_of_alone": arm["p999_ms"] <= GOAL_P999_RATIO * base["p999_ms"],
            "p99_better_than_arm_2_by_more_than_spread": plain["p99_ms"] - arm["p99_ms"] > spread,
            "errors_at_most_0_1_percent": _clean(arm),
        }
        arms[str(number)] = {
            "p99_ratio_to_alone": _ratio(arm["p99_ms"], base["p99_ms"]),
            "p999_ratio_to_alone": _ratio(arm["p999_ms"], base["p999_ms"]),
            "p99_gain_over_arm_2_ms": round(plain["p99_ms"] - arm["p99_ms"], 3),
            "spread_ms": spread,
            **checks,
            "met": all(checks.values()),
        }
    best = max(
        arms,
        key=lambda a: (
            sum(bool(v) for k, v in arms[a].items() if k != "met"),
            -summary[int(a)]["p99_ms"],
        ),
        default=None,
    )
    return {"met": any(a["met"] for a in arms.values()), "best_arm": best, "arms": arms}


def _clean(arm: Mapping[str, Any]) -> bool:
    return int(arm["errors"]) <= MAX_ERROR_FRACTION * max(int(arm["requests"]), 1)


def _ratio(value: float, base: float) -> float | None:
    return round(value / base, 3) if base > 0 else None


def table(summary: Mapping[int, Mapping[str, Any]]) -> str:
    """The per-arm medians as a Markdown table (docs/benchmarks.md, docs/colocation.md)."""
    base = summary.get(BASELINE_ARM)
    lines = [
        "| arm | node CPU | online CPU | batch CPU | p50 | p99 (spread) | p99.9 | p99 / alone | errors |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for number, arm in sorted(summary.items()):
        ratio = _ratio(arm["p99_ms"], base["p99_ms"]) if base else None
        lines.append(
            f"| {number}. {arm['name']} | {arm['node_cpu_percent']:.0f}% "
            f"| {arm['online_cpu_percent']:.0f}% | {arm['batch_cpu_percent']:.0f}% "
            f"| {arm['p50_ms']:.2f} ms | {arm['p99_ms']:.2f} ms ({arm['p99_spread_ms']:.2f}) "
            f"| {arm['p999_ms']:.2f} ms | {'-' if ratio is None else f'{ratio:.2f}x'} "
            f"| {arm['errors']} / {arm['requests']} |"
        )
    return "\n".join(lines)


def plot(records: Sequence[Mapping[str, Any]], *, rate: int) -> bytes:
    """p99 against node CPU, one point per arm and round, as PNG bytes."""
    series: dict[int, _pngplot.Series] = {}
    for record in sorted(records, key=lambda r: int(r["arm"])):
        number = int(record["arm"])
        label = f"{number} {record['arm_name']}"
        points = list(series[number].points) if number in series else []
        points.append((float(record["node_cpu_percent"]), float(record["p99_ms"])))
        series[number] = _pngplot.Series(label, points)
    canvas = _pngplot.scatter(
        list(series.values()),
        x_title="NODE CPU (%)",
        y_title="ONLINE P99 (MS)",
        title=f"NGINX AT {rate} REQ/S: P99 VS NODE CPU, ONE POINT PER ARM AND ROUND",
        x_range=(0.0, 100.0),
    )
    return _pngplot.png_bytes(canvas)
