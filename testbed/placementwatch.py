"""Following the placement loop on real nodes through the API: `testbed.placementloop`'s eyes.

`Watch.poll` reads the scenario namespace's Events (the descheduler's
`Descheduled` and `EvictionFailed`), its Pods (evicted ones gone, replacements
Running where kube-scheduler bound them) and the NodeMetrics, narrates what
changed through `say`, and keeps an `Outcome`: what the e2e test asserts and
the demo summarizes. Node CPU is a percentage of the Node's allocatable CPU,
as LowNodeLoad and the extender count it.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kube import quantity, rest

Say = Callable[[str], None]
TOWARDS = re.compile(r"from node (\S+) towards node (\S+) by (\S+?)(?:,|:)")
NODEMETRICS = rest.object_path("slo.koordinator.sh", "v1alpha1", "nodemetrics")


@dataclass(frozen=True, slots=True)
class Scene:
    """Where the loop plays: its namespace, the nodes, the hot one, LowNodeLoad's high
    CPU mark and the NodeMetric averaging window (seconds)."""

    namespace: str
    nodes: tuple[str, ...]
    hot: str
    high_cpu: float
    window_seconds: int


@dataclass(slots=True)
class Outcome:
    """What happened, for the test's assertions and the demo's summary."""

    evictions: list[dict[str, str]] = field(default_factory=list)  # pod, app, from, to, message
    refusals: list[dict[str, str]] = field(default_factory=list)  # pod, app, message
    placements: list[dict[str, str]] = field(default_factory=list)  # pod, app, node
    # node -> cpu % in the last report before the first eviction: what the descheduler
    # acted on, not the first reports' start-up noise (image imports, agents starting),
    # which put a node that never ran hot at 30 % in the summary
    before: dict[str, float] = field(default_factory=dict)
    after: dict[str, float] = field(default_factory=dict)  # node -> cpu % when n1 cooled
    cooled: bool = False
    kept: list[str] = field(default_factory=list)  # PDB-protected pods still on the hot node
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def ready(pod: Mapping[str, Any]) -> bool:
    """Ready by its kubelet, and not being deleted."""
    conditions = pod["status"].get("conditions", [])
    return pod["metadata"].get("deletionTimestamp") is None and any(
        c["type"] == "Ready" and c["status"] == "True" for c in conditions
    )


def pods(kube: rest.Rest, namespace: str, selector: str = "") -> list[dict[str, Any]]:
    """The pods of `namespace` (matching the label `selector`, if any)."""
    query = {"labelSelector": selector} if selector else {}
    items: list[dict[str, Any]] = kube.get(f"/api/v1/namespaces/{namespace}/pods", **query)["items"]
    return items


def parse_time(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()


class Watch:
    """Reads Events, Pods and NodeMetrics each second and keeps the `Outcome` up to date."""

    def __init__(self, kube: rest.Rest, scene: Scene, initial: set[str], say: Say) -> None:
        self.kube, self.scene, self.initial, self.say = kube, scene, initial, say
        self.outcome = Outcome()
        self.seen: set[str] = set()
        self.placed: set[str] = set()
        self.evicted: set[str] = set()  # pod names (unique: the ReplicaSet's random suffix)
        self.gone_at: float | None = None  # wall time the last evicted pod was gone
        self.reports: dict[str, str] = {}
        self.allocatable = {
            n: quantity.cpu_millis(kube.get(f"/api/v1/nodes/{n}")["status"]["allocatable"]["cpu"])
            for n in scene.nodes
        }

    def poll(self) -> None:
        self._events()
        self._pod_changes()
        self._metrics()

    def _events(self) -> None:
        items = self.kube.get(f"/api/v1/namespaces/{self.scene.namespace}/events")["items"]
        for event in sorted(items, key=lambda e: e["metadata"]["creationTimestamp"]):
            uid, reason = event["metadata"]["uid"], event["reason"]
            if uid in self.seen or reason not in ("Descheduled", "EvictionFailed"):
                continue
            self.seen.add(uid)
            pod, message = event["involvedObject"]["name"], event["message"]
            app = pod.split("-")[0]
            if reason == "Descheduled":
                found = TOWARDS.search(message)
                source, target, _plugin = found.groups() if found else ("?", "?", "?")
                self.evicted.add(pod)
                self.outcome.evictions.append(
                    {"pod": pod, "app": app, "from": source, "to": target, "message": message}
                )
                self.say(
                    f"  ⇢ evicted {pod} from {source} (descheduler's pick: {target}) — {message}"
                )
            else:
                self.outcome.refusals.append({"pod": pod, "app": app, "message": message})
                self.say(f"  ✗ not evicted {pod} — {message}")

    def _pod_changes(self) -> None:
        found = pods(self.kube, self.scene.namespace)
        names = {p["metadata"]["name"] for p in found}
        if self.evicted & names:
            self.gone_at = None  # an evicted pod is still terminating (or another was evicted)
        elif self.evicted and self.gone_at is None:
            self.gone_at = time.time()
            self.say(f"  ⇢ the kubelet on {self.scene.hot} stopped the evicted pods; they are gone")
        for pod in found:
            uid, name = pod["metadata"]["uid"], pod["metadata"]["name"]
            if uid in self.initial or uid in self.placed or not ready(pod):
                continue
            self.placed.add(uid)
            node = pod["spec"]["nodeName"]
            self.outcome.placements.append({"pod": name, "app": name.split("-")[0], "node": node})
            self.say(
                f"  ⇢ kube-scheduler bound {name} (the ReplicaSet controller's replacement) to "
                f"{node}; its kubelet runs it"
            )

    def cpu_percent(self, metric: Mapping[str, Any]) -> float | None:
        usage = ((metric.get("status") or {}).get("nodeMetric") or {}).get("nodeUsage") or {}
        cpu = usage.get("resources", {}).get("cpu")
        name = metric["metadata"]["name"]
        return None if cpu is None else quantity.cpu_millis(cpu) / self.allocatable[name] * 100

    def _metrics(self) -> None:
        metrics = {m["metadata"]["name"]: m for m in self.kube.get(NODEMETRICS)["items"]}
        stamps = {
            n: str((metrics.get(n, {}).get("status") or {}).get("updateTime", ""))
            for n in self.scene.nodes
        }
        if stamps == self.reports or not all(stamps.values()):
            return
        self.reports = stamps
        percent = {n: self.cpu_percent(metrics[n]) for n in self.scene.nodes}
        self.say(
            "  NodeMetrics: "
            + ", ".join(
                f"{n} cpu {p:.1f}%" if p is not None else f"{n} -" for n, p in percent.items()
            )
            + f" (updated {', '.join(s[11:19] for s in stamps.values())})"
        )
        hot = percent[self.scene.hot]
        # the last report before the first eviction (the first report, when the watch reads
        # it in the same poll as the first eviction): what the descheduler acted on
        if not self.outcome.evictions or not self.outcome.before:
            self.outcome.before = {n: p for n, p in percent.items() if p is not None}
        # a hot-node report averaging only time after the evicted pods were gone (a later
        # eviction starts the wait again: the loop may move pods over several cycles)
        if (
            self.gone_at is not None
            and hot is not None
            and parse_time(stamps[self.scene.hot]) - self.scene.window_seconds >= self.gone_at
        ):
            self.outcome.after = {n: p for n, p in percent.items() if p is not None}
            self.outcome.cooled = hot <= self.scene.high_cpu

    def done(self) -> bool:
        """The hot node reported cool, and every evicted workload has a Running replacement."""
        evicted = {e["app"] for e in self.outcome.evictions}
        return self.outcome.cooled and evicted <= {p["app"] for p in self.outcome.placements}
