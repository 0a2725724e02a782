"""What one descheduling cycle decided: the `CycleReport` and the log that builds it.

The evictor and plugins write into a `DecisionLog` while the cycle runs (through
`handle.decisions` and the evictor proxy); the runner freezes it into a
`CycleReport` at the end. The report is the explain output of "a reason for
every decision" (docs/design.md, "Beyond the reference" 3): every eviction in
order, every candidate that was considered and not evicted with its reason
code, per-node projections before and after, and cycle-level notes such as
"fewer than two ready nodes".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from descheduler.framework.reasons import Reason
from kube.quantity import Resources


@dataclass(frozen=True, slots=True)
class Eviction:
    """A pod the evictor let go (or, in dry-run, would have)."""

    pod: str  # namespace/name
    node: str
    plugin: str
    reason: str  # the plugin's own words
    profile: str = ""
    # KEP-1397: the pod answered "evacuation triggered" and leaves in its own time
    background: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pod": self.pod,
            "node": self.node,
            "plugin": self.plugin,
            "profile": self.profile,
            "reason": self.reason,
        }
        if self.background:
            out["background"] = True
        return out


@dataclass(frozen=True, slots=True)
class Skip:
    """A candidate a plugin considered and did not evict."""

    pod: str
    node: str
    plugin: str
    reason_code: Reason
    detail: str = ""
    profile: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "node": self.node,
            "plugin": self.plugin,
            "profile": self.profile,
            "reason_code": self.reason_code.value,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class Note:
    """A cycle- or plugin-level reason for doing nothing ("no underutilized nodes").

    `node` is set when the note is about one node, e.g. a hot node a balance
    plugin left hot (and why: `no_destination_headroom`, `nothing_evictable`,
    `limit_reached`, ...).
    """

    reason: Reason
    detail: str = ""
    plugin: str = ""
    profile: str = ""
    node: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "reason": self.reason.value,
            "detail": self.detail,
            "plugin": self.plugin,
            "profile": self.profile,
            "node": self.node,
        }


@dataclass(frozen=True, slots=True)
class PluginFailure:
    """A plugin call that raised; the runner carried on."""

    plugin: str
    profile: str
    extension_point: str
    error: str


@dataclass(frozen=True, slots=True)
class NodeProjection:
    """A node's projected state before the cycle's decisions and after them.

    Requests are the sum of pod requests (with a `pods` count); usage is
    whatever a load-aware plugin set on the snapshot (None where none did).
    """

    node: str
    requests_before: Resources
    requests_after: Resources
    usage_before: Resources | None = None
    usage_after: Resources | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "node": self.node,
            "requests_before": self.requests_before.to_api(),
            "requests_after": self.requests_after.to_api(),
        }
        if self.usage_before is not None and self.usage_after is not None:
            out["usage_before"] = self.usage_before.to_api()
            out["usage_after"] = self.usage_after.to_api()
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class CycleReport:
    """Everything one `Runner.run_once()` decided."""

    started_at: datetime
    dry_run: bool
    duration_seconds: float = 0.0
    evictions: tuple[Eviction, ...] = ()
    skipped: tuple[Skip, ...] = ()
    notes: tuple[Note, ...] = ()
    projections: tuple[NodeProjection, ...] = ()
    failures: tuple[PluginFailure, ...] = ()

    @property
    def evicted_pods(self) -> list[str]:
        """namespace/name of every eviction, in order."""
        return [e.pod for e in self.evictions]

    @property
    def reasons(self) -> list[Reason]:
        """The cycle- and plugin-level reason codes, in order."""
        return [n.reason for n in self.notes]

    def skips_for(self, pod: str) -> list[Skip]:
        """Every reason `pod` (namespace/name) was passed over."""
        return [s for s in self.skipped if s.pod == pod]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the explain report of `simulate`)."""
        return {
            "startedAt": self.started_at.isoformat(),
            "dryRun": self.dry_run,
            "durationSeconds": round(self.duration_seconds, 6),
            "evictions": [e.to_dict() for e in self.evictions],
            "skipped": [s.to_dict() for s in self.skipped],
            "notes": [n.to_dict() for n in self.notes],
            "projections": [p.to_dict() for p in self.projections],
            "failures": [
                {
                    "plugin": f.plugin,
                    "profile": f.profile,
                    "extensionPoint": f.extension_point,
                    "error": f.error,
                }
                for f in self.failures
            ],
        }


@dataclass(slots=True)
class DecisionLog:
    """The mutable record of the running cycle (one per cycle, owned by the runner).

    Skips are de-duplicated per (plugin, pod, reason): a plugin that asks twice
    about the same pod in one cycle reports it once.
    """

    evictions: list[Eviction] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    failures: list[PluginFailure] = field(default_factory=list)
    _seen: set[tuple[str, str, Reason]] = field(default_factory=set)

    def add_skip(self, skip: Skip) -> bool:
        """Record a skip; False when this plugin already reported it this cycle."""
        key = (skip.plugin, skip.pod, skip.reason_code)
        if key in self._seen:
            return False
        self._seen.add(key)
        self.skipped.append(skip)
        return True
