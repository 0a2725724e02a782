"""BECPUIdle: cpu.idle = 1 (SCHED_IDLE) on each BE pod's cgroup, never on the QoS roots."""

from qosmanager import features
from qosmanager.plugins.becpuidle import rules
from qosmanager.plugins.becpuidle.plugin import NAME, BECPUIdle

# The QoS plugin surface (qosmanager.discovery): gate name, gate spec, factory.
FEATURE = features.builtin_spec(NAME)
factory = BECPUIdle  # unbound; the agent binds its Handle after parsing the flags

__all__ = ["FEATURE", "NAME", "BECPUIdle", "factory", "rules"]
