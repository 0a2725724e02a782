"""The BEMemoryGuard filter: its args, the per-node memory it watches, and the verdict."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender import framework
from kube import cache, classify, objects, slo

NAME = "BEMemoryGuard"


@dataclass(frozen=True, slots=True, kw_only=True)
class Args:
    """`memoryThresholdPercent`: a BE pod is refused above this share of allocatable memory;
    `metricExpirationSeconds`: an older NodeMetric says nothing (the node is not refused)."""

    memory_threshold_percent: int = 70
    metric_expiration_seconds: int = 180

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], path: str) -> Args:
        fields = {
            "memoryThresholdPercent": ("memory_threshold_percent", 1, 100),
            "metricExpirationSeconds": ("metric_expiration_seconds", 1, None),
        }
        values: dict[str, int] = {}
        problems = []
        for key, value in raw.items():
            if key not in fields:
                problems.append(
                    f"{path}.{key}: unknown field; known fields are {', '.join(fields)}"
                )
                continue
            attribute, lo, hi = fields[key]
            if not isinstance(value, int) or isinstance(value, bool):
                problems.append(f"{path}.{key}: must be an integer (got {value!r})")
            elif value < lo or (hi is not None and value > hi):
                span = f"within [{lo}, {hi}]" if hi is not None else f"at least {lo}"
                problems.append(f"{path}.{key}: must be {span} (got {value})")
            else:
                values[attribute] = value
        if problems:
            raise framework.ArgsError(problems)
        return cls(**values)

    def to_mapping(self) -> dict[str, int]:
        return {
            "memoryThresholdPercent": self.memory_threshold_percent,
            "metricExpirationSeconds": self.metric_expiration_seconds,
        }


class BEMemoryGuard:
    """Fed by two watches (Nodes for allocatable memory, NodeMetrics for used memory)."""

    def __init__(self, args: Args, clock: Any) -> None:
        self.args = args
        self._clock = clock
        self._lock = threading.Lock()
        self._allocatable: dict[str, int] = {}  # node -> bytes
        self._used: dict[str, tuple[int, float]] = {}  # node -> (bytes, updateTime epoch s)

    # -- watches ------------------------------------------------------------------

    @staticmethod
    def project_node(raw: Mapping[str, Any]) -> tuple[str, int]:
        node = objects.Node.from_api(raw)
        return str(node.name), node.allocatable.get("memory", 0)

    @staticmethod
    def project_metric(raw: Mapping[str, Any]) -> tuple[str, int, float] | None:
        metric = slo.NodeMetric.from_api(raw)
        info, updated = metric.status.node_metric, metric.status.update_time
        if info is None or updated is None or "memory" not in info.node_usage:
            return None
        return metric.name, info.node_usage["memory"], updated.timestamp()

    def on_node(self, kind: str, old: tuple[str, int] | None, new: tuple[str, int] | None) -> None:
        with self._lock:
            if new is None and old is not None:
                self._allocatable.pop(old[0], None)
            elif new is not None:
                self._allocatable[new[0]] = new[1]

    def on_metric(self, kind: str, old: Any, new: tuple[str, int, float] | None) -> None:
        with self._lock:
            if new is None and old is not None:
                self._used.pop(old[0], None)
            elif new is not None:
                self._used[new[0]] = (new[1], new[2])

    # -- extension points ---------------------------------------------------------

    def pre_filter(self, pod: framework.interfaces.Pod) -> bool:
        """Whether the pod is best-effort: computed once per pod, not once per node."""
        try:
            return objects.Pod.from_api(pod).koord_qos is classify.KoordQOS.BE
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise framework.InvalidPod(f"Pod: not a valid v1.Pod ({err})") from None

    def filter(self, state: bool, names: Sequence[str]) -> Mapping[str, str]:
        if not state:
            return {}
        limit = self.args.memory_threshold_percent
        fresh_after = self._clock() - self.args.metric_expiration_seconds
        refused = {}
        with self._lock:
            for name in names:
                used = self._used.get(name)
                total = self._allocatable.get(name, 0)
                if used is None or total <= 0 or used[1] < fresh_after:
                    continue
                percent = used[0] * 100 // total
                if percent > limit:
                    refused[name] = (
                        f"node {name}: memory usage {percent} percent > {limit} percent,"
                        " no room for a BE pod (BEMemoryGuard)"
                    )
        return refused


def factory(args: Args, handle: framework.Handle) -> BEMemoryGuard:
    guard = BEMemoryGuard(args, handle.clock)
    handle.watch(cache.NODES, project=guard.project_node, on_event=guard.on_node)
    handle.watch(cache.NODEMETRICS, project=guard.project_metric, on_event=guard.on_metric)
    return guard
