"""BECPUSuppress: the CPU budget of best-effort pods, by cfs quota or cpuset."""

from qosmanager.plugins.cpusuppress import budget
from qosmanager.plugins.cpusuppress.plugin import CFS_QUOTA, CPUSET, NAME, CPUSuppress

__all__ = ["CFS_QUOTA", "CPUSET", "NAME", "CPUSuppress", "budget"]
