"""The built-in QoS strategies (`IN_TREE`) and `registry()`, every QoS plugin the agent runs.

Each built-in package exports the QoS plugin surface an out-of-tree plugin
exports too (`NAME`, `FEATURE`, `factory`; `qosmanager.discovery`), and
`registry()` loads the built-ins, the installed entry points of group
`nodeqos.agent.qos_plugins` and an embedder's extra plugins through the same
path. `IN_TREE` is the table pyproject.toml declares as nodeqos's own entry
points, kept here for a checkout whose installed metadata is stale.

Each strategy is a plugin of the same framework as extension plugins, gated by
Koordinator's gate name in the agent's `--feature-gates` (see
`qosmanager.features.BUILTIN_FEATURES` for names and defaults) and, inside,
by its NodeSLO switch.

Building is two-phase where the host is not known yet: the agent calls
`registry()` before parsing its command line (the registry's flags are
part of it), then `bind_handle(registry, handle)` once `--cgroup-root` and
the rest are parsed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from qosmanager import discovery, features, framework
from qosmanager.plugins.base import Handle, PeriodicStrategy
from qosmanager.plugins.batchresource import BatchResource
from qosmanager.plugins.becpuidle import BECPUIdle
from qosmanager.plugins.cgreconcile import CgroupReconcile
from qosmanager.plugins.cpuburst import CPUBurst
from qosmanager.plugins.cpuevict import CPUEvict
from qosmanager.plugins.cpusuppress import CPUSuppress
from qosmanager.plugins.memoryevict import MemoryEvict
from qosmanager.plugins.sysconfig import SystemConfig

__all__ = [
    "IN_TREE",
    "BECPUIdle",
    "BatchResource",
    "CPUBurst",
    "CPUEvict",
    "CPUSuppress",
    "CgroupReconcile",
    "Handle",
    "MemoryEvict",
    "PeriodicStrategy",
    "SystemConfig",
    "bind_handle",
    "builtin_registry",
    "registry",
]

# name → module; the same lines as [project.entry-points."nodeqos.agent.qos_plugins"].
IN_TREE: Mapping[str, str] = MappingProxyType(
    {
        features.BE_CPU_SUPPRESS: "qosmanager.plugins.cpusuppress",
        features.CPU_BURST: "qosmanager.plugins.cpuburst",
        features.BE_CPU_EVICT: "qosmanager.plugins.cpuevict",
        features.BE_MEMORY_EVICT: "qosmanager.plugins.memoryevict",
        features.CGROUP_RECONCILE: "qosmanager.plugins.cgreconcile",
        features.SYSTEM_CONFIG: "qosmanager.plugins.sysconfig",
        features.BATCH_RESOURCE: "qosmanager.plugins.batchresource",
        features.BE_CPU_IDLE: "qosmanager.plugins.becpuidle",
    }
)


def registry(extra: Iterable[object] = (), *, installed: bool = True) -> framework.PluginRegistry:
    """A fresh registry: the built-ins, the installed QoS plugins (unless `installed` is
    False) and the `extra` plugin objects, all unbound (`bind_handle` gives them a Handle).
    """
    return discovery.registry(IN_TREE, extra, entry_points=None if installed else ())


def builtin_registry(handle: Handle | None = None) -> framework.PluginRegistry:
    """A fresh registry holding one instance of every built-in strategy.

    Without `handle` the strategies are unbound: `bind_handle` must give them
    one before the manager sets them up.
    """
    found = registry(installed=False)
    if handle is not None:
        bind_handle(found, handle)
    return found


def bind_handle(registry: framework.PluginRegistry, handle: Handle) -> None:
    """Give every `PeriodicStrategy` of `registry` its host-side collaborators.

    That is every built-in, and any extension plugin built on `PeriodicStrategy`
    (the agent registers extension plugins before it can build the handle).
    """
    for entry in registry:
        if isinstance(entry.plugin, PeriodicStrategy):
            entry.plugin.bind(handle)
