"""Collectors: the host (cgroups, /proc) into metric-cache samples, one round at a time.

Each collector is a small class with a `name` and `collect(round)`; the
`agent.collection.Collection` runner calls them in the order of
`build_collectors` (node, pods, best-effort group, host applications, PSI,
then system usage, which needs the others' totals), times each one and
isolates its failures.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import cgroups
from agent import discovery
from agent.collectors.base import Collector, CounterRates, ErrorSink, Reason, Round, rate, reason_of
from agent.collectors.besteffort import BestEffortCollector
from agent.collectors.filereader import FileReader
from agent.collectors.node import NodeCollector, NodePSICollector, PodsNodeCollector
from agent.collectors.pods import PodCollector
from agent.collectors.system import HostApp, HostAppCollector, SystemCollector, system_usage

__all__ = [
    "BestEffortCollector",
    "Collector",
    "CounterRates",
    "ErrorSink",
    "FileReader",
    "HostApp",
    "HostAppCollector",
    "NodeCollector",
    "NodePSICollector",
    "PodCollector",
    "PodsNodeCollector",
    "Reason",
    "Round",
    "SystemCollector",
    "build_collectors",
    "rate",
    "reason_of",
    "system_usage",
]


def build_collectors(
    fs: cgroups.CgroupFS,
    procfs: cgroups.ProcFS,
    source: discovery.PodSource,
    errors: ErrorSink,
    reader: FileReader,
    *,
    host_apps: Sequence[HostApp] = (),
    pod_psi: bool = False,
    node_from_pods: bool = False,
) -> list[Collector]:
    """Every collector, in the order a round must run them; `node_from_pods` measures
    the node as its kubepods cgroup instead of /proc."""
    node: Collector = (
        PodsNodeCollector(fs, errors) if node_from_pods else NodeCollector(procfs, errors)
    )
    return [
        node,
        PodCollector(fs, source, errors, reader, psi=pod_psi),
        BestEffortCollector(fs, errors),
        HostAppCollector(fs, host_apps, errors),
        NodePSICollector(Path(procfs.root), errors),
        SystemCollector(),
    ]
