"""The running cycle's state, and the decision recorder plugins write reasons into.

`Cycle` holds what lives exactly one cycle: the snapshot, the `DecisionLog`, the
limit `Ledger`, and which pods the API already refused this cycle. The runner
puts a fresh one into the shared `CycleCell` at the start of every cycle, which
is how limits and "not retried this cycle" reset.

`Decisions` (a profile's `handle.decisions`) records skips and notes into the
current cycle, with the matching log line and
`nodeqos_descheduler_decisions_total{plugin,reason}` increment.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from descheduler.framework.limits import Ledger
from descheduler.framework.metrics import Metrics
from descheduler.framework.reasons import Reason, Refusal
from descheduler.framework.report import DecisionLog, Note, Skip
from descheduler.framework.snapshot import Snapshot
from kube import objects

log = logging.getLogger("descheduler.decisions")

# Outcomes worth an INFO line; filter refusals are routine and go to DEBUG.
_LOUD = frozenset(
    {
        Reason.PDB_BLOCKED,
        Reason.POD_GONE,
        Reason.API_UNAVAILABLE,
        Reason.FORBIDDEN,
        Reason.EVICTION_FAILED,
        Reason.LIMIT_REACHED,
    }
)


@dataclass(slots=True)
class Cycle:
    snapshot: Snapshot
    ledger: Ledger
    dry_run: bool
    log: DecisionLog = field(default_factory=DecisionLog)
    pdb_blocked: set[str] = field(default_factory=set)  # pod UIDs refused with 429
    gone: set[str] = field(default_factory=set)  # pod UIDs the API no longer has
    api_down: str | None = None  # set after the API server was unreachable


class CycleCell:
    """Holds the running cycle; plugins reach it only through their Handle."""

    __slots__ = ("_cycle",)

    def __init__(self) -> None:
        self._cycle: Cycle | None = None

    def current(self) -> Cycle:
        if self._cycle is None:
            raise RuntimeError("no descheduling cycle is running")
        return self._cycle

    def snapshot(self) -> Snapshot:
        """The running cycle's snapshot (the Handle's accessor)."""
        return self.current().snapshot

    def begin(self, cycle: Cycle) -> None:
        self._cycle = cycle

    def end(self) -> None:
        self._cycle = None


def mode(dry_run: bool) -> str:
    """Prefix marking every decision log line of a dry run."""
    return "[dry-run] " if dry_run else ""


class Decisions:
    """A profile's decision recorder: `handle.decisions`."""

    __slots__ = ("_cell", "_metrics", "profile")

    def __init__(self, cell: CycleCell, metrics: Metrics, profile: str) -> None:
        self._cell = cell
        self._metrics = metrics
        self.profile = profile

    def skip(
        self,
        pod: objects.Pod,
        *,
        plugin: str,
        reason: Reason | Refusal,
        detail: str = "",
    ) -> None:
        """`plugin` considered `pod` and did not evict it, because of `reason`."""
        if isinstance(reason, Refusal):
            detail = detail or str(reason)
            code = reason.reason
        else:
            code = reason
        cycle = self._cell.current()
        entry = Skip(pod.key, pod.node_name, plugin, code, detail, self.profile)
        if not cycle.log.add_skip(entry):
            return
        self._metrics.decisions.labels(plugin, code.value).inc()
        level = logging.INFO if code in _LOUD else logging.DEBUG
        log.log(
            level,
            "%snot evicting pod %s on node %s (plugin %s, profile %s): %s%s",
            mode(cycle.dry_run),
            pod.key,
            pod.node_name,
            plugin,
            self.profile,
            code.value,
            f": {detail}" if detail else "",
        )

    def note(self, reason: Reason, detail: str = "", *, plugin: str = "", node: str = "") -> None:
        """A plugin- or cycle-level reason for doing nothing ("no underutilized nodes").

        With `node`, the note says why a hot node was left hot; it also counts
        into `nodeqos_descheduler_unrelieved_nodes_total{plugin,reason}`.
        """
        cycle = self._cell.current()
        cycle.log.notes.append(Note(reason, detail, plugin, self.profile, node))
        if node:
            self._metrics.unrelieved_nodes.labels(plugin, reason.value).inc()
        log.info(
            "%s%s%s: %s%s%s",
            mode(cycle.dry_run),
            f"{plugin} " if plugin else "",
            f"(profile {self.profile})" if self.profile else "",
            f"node {node} left hot: " if node else "",
            reason.value,
            f": {detail}" if detail else "",
        )
