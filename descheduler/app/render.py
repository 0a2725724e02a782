"""`simulate --output table`: the explain report for people.

Nodes first (each resource before -> after, with a ten-step bar), then every
candidate in decision order (evictions, in eviction order, then every pod
passed over with its reason code and detail), then cycle notes and plugin
failures, and a one-line summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from descheduler.app.simulate import SHOWN, Result

BAR_WIDTH = 10


def bar(percent: float, width: int = BAR_WIDTH) -> str:
    """`[###.......]`: one `#` per started tenth, clamped to the width."""
    filled = max(0, min(width, round(percent * width / 100)))
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _cell(before: Mapping[str, float], after: Mapping[str, float], name: str) -> str:
    if name not in before:
        return "-"
    b, a = before[name], after.get(name, before[name])
    return f"{b:5.1f} {bar(b)} -> {a:5.1f} {bar(a)}"


def _align(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def table(result: Result) -> str:
    report = result.report
    out = [
        f"Simulated descheduling cycle at {result.now.isoformat()} (dry run: nothing is evicted)",
        "",
        "NODES (% of capacity, before -> after)",
    ]
    rows = [["NAME", "BASIS", *(name.upper() for name in SHOWN)]]
    for node in result.nodes:
        marker = "" if node.considered else " *"
        rows.append(
            [
                node.name + marker,
                node.basis,
                *(_cell(node.before, node.after, name) for name in SHOWN),
            ]
        )
    out += _align(rows)
    if not all(node.considered for node in result.nodes):
        out.append("  * not considered: not Ready, or not selected by nodeSelector")
    out += ["", "DECISIONS"]
    decisions = [["POD", "NODE", "PLUGIN", "DECISION", "REASON"]]
    decisions += [[e.pod, e.node, e.plugin, "evicted", e.reason] for e in report.evictions]
    decisions += [[s.pod, s.node, s.plugin, s.reason_code.value, s.detail] for s in report.skipped]
    out += _align(decisions) if len(decisions) > 1 else ["  (no candidates)"]
    if report.notes:
        out += ["", "NOTES"]
        for note in report.notes:
            who = f" [{note.plugin}]" if note.plugin else ""
            out.append(f"  {note.reason.value}{who}: {note.detail}")
    if report.failures:
        out += ["", "PLUGIN FAILURES"]
        for failure in report.failures:
            out.append(
                f"  {failure.plugin} (profile {failure.profile}, {failure.extension_point}): "
                f"{failure.error}"
            )
    if result.warnings:
        out += ["", "WARNINGS"]
        out += [f"  {warning}" for warning in result.warnings]
    out += [
        "",
        f"{len(report.evictions)} would be evicted, {len(report.skipped)} passed over, "
        f"{len(report.failures)} plugin errors",
    ]
    return "\n".join(out) + "\n"
