"""The built-in QoS strategies and `builtin_registry`, the one list of them.

Each strategy is a plugin of the same framework as extension plugins, gated by
Koordinator's gate name in the agent's `--feature-gates` (see
`qosmanager.features.BUILTIN_FEATURES` for names and defaults) and, inside,
by its NodeSLO switch.

Building is two-phase where the host is not known yet: the agent calls
`builtin_registry()` before parsing its command line (the registry's flags are
part of it), then `bind_handle(registry, handle)` once `--cgroup-root` and
the rest are parsed.
"""

from __future__ import annotations

from qosmanager import features, framework
from qosmanager.plugins.base import Handle, PeriodicStrategy
from qosmanager.plugins.cgreconcile import CgroupReconcile
from qosmanager.plugins.cpuburst import CPUBurst
from qosmanager.plugins.cpuevict import CPUEvict
from qosmanager.plugins.cpusuppress import CPUSuppress
from qosmanager.plugins.memoryevict import MemoryEvict
from qosmanager.plugins.sysconfig import SystemConfig

__all__ = [
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
]

_BUILTINS: tuple[type[PeriodicStrategy], ...] = (
    CPUSuppress,
    CPUBurst,
    CPUEvict,
    MemoryEvict,
    CgroupReconcile,
    SystemConfig,
)


def builtin_registry(handle: Handle | None = None) -> framework.PluginRegistry:
    """A fresh registry holding one instance of every built-in strategy.

    Without `handle` the strategies are unbound: `bind_handle` must give them
    one before the manager sets them up.
    """
    table = {f.name: f for f in features.BUILTIN_FEATURES}
    registry = framework.PluginRegistry()
    for strategy in _BUILTINS:
        feature = table[strategy.name]
        spec = features.FeatureSpec(feature.default, feature.stage, feature.description)
        registry.register(strategy.name, spec, strategy(handle), builtin=True)
    return registry


def bind_handle(registry: framework.PluginRegistry, handle: Handle) -> None:
    """Give every `PeriodicStrategy` of `registry` its host-side collaborators.

    That is every built-in, and any extension plugin built on `PeriodicStrategy`
    (the agent registers extension plugins before it can build the handle).
    """
    for entry in registry:
        if isinstance(entry.plugin, PeriodicStrategy):
            entry.plugin.bind(handle)
