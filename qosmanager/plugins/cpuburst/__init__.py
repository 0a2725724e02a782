"""CPUBurst: cfs burst and throttle-driven cfs quota scaling for LS pods."""

from qosmanager.plugins.cpuburst import burst
from qosmanager.plugins.cpuburst.plugin import NAME, CPUBurst

__all__ = ["NAME", "CPUBurst", "burst"]
