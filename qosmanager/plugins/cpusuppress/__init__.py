"""BECPUSuppress: the CPU budget of best-effort pods, by cfs quota or cpuset."""

from qosmanager import features
from qosmanager.plugins.cpusuppress import budget
from qosmanager.plugins.cpusuppress.plugin import CFS_QUOTA, CPUSET, NAME, CPUSuppress

# The QoS plugin surface (qosmanager.discovery): gate name, gate spec, factory.
FEATURE = features.builtin_spec(NAME)
factory = CPUSuppress  # unbound; the agent binds its Handle after parsing the flags

__all__ = ["CFS_QUOTA", "CPUSET", "FEATURE", "NAME", "CPUSuppress", "budget", "factory"]
