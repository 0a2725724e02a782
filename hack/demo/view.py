"""What the demo prints: a per-node usage table and a line per eviction decision."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

BAR = 24


@dataclass(frozen=True)
class NodeView:
    name: str
    cpu_percent: float | None  # None: no NodeMetric yet
    memory_percent: float | None
    pods: int


def bar(percent: float | None, high: float) -> str:
    if percent is None:
        return "·" * BAR + "   --  "
    filled = min(BAR, round(percent / 100 * BAR))
    mark = min(BAR - 1, round(high / 100 * BAR))
    cells = ["█" if i < filled else "░" for i in range(BAR)]
    cells[mark] = "|" if mark >= filled else cells[mark]
    return "".join(cells) + f" {percent:5.1f}%"


def table(
    title: str, nodes: Sequence[NodeView], before: Mapping[str, float], high: float, low: float
) -> str:
    lines = [
        f"── {title} " + "─" * max(0, 74 - len(title)),
        f"  {'node':<5} {'cpu before':<{BAR + 7}}  {'cpu now (| = high ' + str(int(high)) + '%)':<{BAR + 7}}  mem now  pods",
    ]
    for node in nodes:
        role = (
            "hot"
            if (node.cpu_percent or 0) > high
            else "cool"
            if (node.cpu_percent or 100) <= low
            else ""
        )
        lines.append(
            f"  {node.name:<5} {bar(before.get(node.name), high)}  {bar(node.cpu_percent, high)}  "
            f"{_percent(node.memory_percent):>6}  {node.pods:>4}  {role}"
        )
    return "\n".join(lines)


def _percent(value: float | None) -> str:
    return "--" if value is None else f"{value:.1f}%"
