"""Reason codes: why a candidate pod was not evicted, or why a cycle did nothing.

Every pod a plugin considers ends up either evicted or with one `Reason`
(docs/design.md, "Beyond the reference" 3). The same codes label the
`nodeqos_descheduler_decisions_total{plugin,reason}` counter, appear in log
lines and fill the `CycleReport` (and, later, `simulate`'s explain output), so
the values are stable, lower-case metric label values.

Filters answer with a `Refusal` (the code plus which filter said no and why)
rather than a bare code, so "filtered" always says by what.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Reason(enum.StrEnum):
    """Why a candidate was not evicted (or a cycle or plugin did nothing)."""

    FILTERED = "filtered"  # an evictor filter refused the pod; the detail names it
    NO_FIT = "no_fit"  # nodeFit: the pod fits no other ready node
    LIMIT_REACHED = "limit_reached"  # maxNoOfPodsToEvict* for this cycle; detail names which
    METRICS_EXPIRED = "metrics_expired"  # NodeMetric older than nodeMetricExpirationSeconds
    PDB_BLOCKED = "pdb_blocked"  # the Eviction API answered 429 (a PodDisruptionBudget)
    BACKOFF = "backoff"  # the pod was refused recently and is resting
    POD_GONE = "pod_gone"  # deleted, or replaced by a namesake with another UID
    WOULD_OVERLOAD_DESTINATION = "would_overload_destination"
    NO_DESTINATION = "no_destination"  # e.g. "no underutilized nodes"
    # A hot node left hot: its destinations' headroom was used up (often by this
    # cycle's earlier moves), or every candidate would overload them.
    NO_DESTINATION_HEADROOM = "no_destination_headroom"
    NOTHING_EVICTABLE = "nothing_evictable"  # a hot node whose candidates were all refused
    NOT_SOURCE = "not_source"  # the pod's node is not one the plugin drains
    COOL_DOWN = "cool_down"  # its workload was moved recently (anti ping-pong)
    API_UNAVAILABLE = "api_unavailable"  # the API server could not be reached
    FORBIDDEN = "forbidden"  # RBAC refused the eviction
    EVICTION_FAILED = "eviction_failed"  # any other API error
    ALREADY_EVICTED = "already_evicted"  # an earlier plugin evicted it this cycle
    # KEP-1397: its eviction was requested earlier and is still in progress in
    # background; nothing is asked again and the caller is told it is leaving
    IN_BACKGROUND = "eviction_in_background"
    TOO_FEW_NODES = "too_few_nodes"  # cycle level: fewer than two ready nodes
    NOT_SYNCED = "not_synced"  # cycle level: the cluster caches have not synced yet


@dataclass(frozen=True, slots=True)
class Refusal:
    """A filter's "no": the code, the filter (plugin) that refused, and why.

    `filter()` and `pre_eviction_filter()` return one, or None to let the pod
    through; `str(refusal)` reads "DefaultEvictor: pod is a DaemonSet pod".
    """

    reason: Reason
    detail: str = ""
    by: str = ""

    def __str__(self) -> str:
        if self.by and self.detail:
            return f"{self.by}: {self.detail}"
        return self.detail or self.by or self.reason.value
