"""The descheduler framework: registry, profiles, snapshot, evictor proxy, runner.

    registry = plugins.registry()                      # in-tree + installed entry points
    cfg = config.load_config(path, plugins=registry.catalog())
    runner = framework.Runner.from_config(cfg, registry, source=..., backend=..., metrics=...)
    report = runner.run_once()                          # a CycleReport

Plugins implement the extension-point Protocols (`interfaces`), are built by a
factory `(args, handle) -> plugin`, and reach the cluster only through the
`Snapshot` they are given and the `Handle` (evictor proxy, decisions, clock).
`discovery` turns entry points (group `nodeqos.descheduler.plugins`) and plugin
modules into Registry entries; a plugin that cannot be loaded is kept as a
broken entry, which costs only the profiles that enable it.
"""

from descheduler.framework.cycle import Decisions
from descheduler.framework.evictor import EvictionCore, EvictorProxy
from descheduler.framework.handle import Handle
from descheduler.framework.interfaces import (
    BalancePlugin,
    Clock,
    ControllerPlugin,
    DeschedulePlugin,
    Evictor,
    EvictorPlugin,
    EvictPlugin,
    FilterPlugin,
    Plugin,
    PreEvictionFilterPlugin,
)
from descheduler.framework.limits import Limits
from descheduler.framework.metrics import Metrics
from descheduler.framework.pdb import DisruptionBudget
from descheduler.framework.profiles import StartupError
from descheduler.framework.reasons import Reason, Refusal
from descheduler.framework.registry import Factory, Registry, RegistryError
from descheduler.framework.report import CycleReport, Eviction, NodeProjection, Note, Skip
from descheduler.framework.runner import Runner, utc_now
from descheduler.framework.snapshot import ClusterState, Snapshot
from descheduler.framework.sources import (
    ClusterSource,
    InformerSource,
    SourceNotReady,
    StaticSource,
)

__all__ = [
    "BalancePlugin",
    "Clock",
    "ClusterSource",
    "ClusterState",
    "ControllerPlugin",
    "CycleReport",
    "Decisions",
    "DeschedulePlugin",
    "DisruptionBudget",
    "EvictPlugin",
    "Eviction",
    "EvictionCore",
    "Evictor",
    "EvictorPlugin",
    "EvictorProxy",
    "Factory",
    "FilterPlugin",
    "Handle",
    "InformerSource",
    "Limits",
    "Metrics",
    "NodeProjection",
    "Note",
    "Plugin",
    "PreEvictionFilterPlugin",
    "Reason",
    "Refusal",
    "Registry",
    "RegistryError",
    "Runner",
    "Skip",
    "Snapshot",
    "SourceNotReady",
    "StartupError",
    "StaticSource",
    "utc_now",
]
