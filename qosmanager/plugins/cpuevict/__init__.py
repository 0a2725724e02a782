"""BECPUEvict: evict best-effort pods whose CPU satisfaction stays too low."""

from qosmanager import features
from qosmanager.plugins.cpuevict import satisfaction
from qosmanager.plugins.cpuevict.plugin import NAME, CPUEvict

# The QoS plugin surface (qosmanager.discovery): gate name, gate spec, factory.
FEATURE = features.builtin_spec(NAME)
factory = CPUEvict  # unbound; the agent binds its Handle after parsing the flags

__all__ = ["FEATURE", "NAME", "CPUEvict", "factory", "satisfaction"]
