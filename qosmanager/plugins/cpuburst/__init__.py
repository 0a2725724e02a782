"""CPUBurst: cfs burst and throttle-driven cfs quota scaling for LS pods."""

from qosmanager import features
from qosmanager.plugins.cpuburst import burst
from qosmanager.plugins.cpuburst.plugin import NAME, CPUBurst

# The QoS plugin surface (qosmanager.discovery): gate name, gate spec, factory.
FEATURE = features.builtin_spec(NAME)
factory = CPUBurst  # unbound; the agent binds its Handle after parsing the flags

__all__ = ["FEATURE", "NAME", "CPUBurst", "burst", "factory"]
