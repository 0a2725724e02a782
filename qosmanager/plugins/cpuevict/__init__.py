"""BECPUEvict: evict best-effort pods whose CPU satisfaction stays too low."""

from qosmanager.plugins.cpuevict import satisfaction
from qosmanager.plugins.cpuevict.plugin import NAME, CPUEvict

__all__ = ["NAME", "CPUEvict", "satisfaction"]
