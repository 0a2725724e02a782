"""CgroupReconcile: memory QoS (memory.min/low/high) per Koordinator QoS class."""

from qosmanager import features
from qosmanager.plugins.cgreconcile.plugin import NAME, CgroupReconcile, MemoryQoS, pod_memory_qos

# The QoS plugin surface (qosmanager.discovery): gate name, gate spec, factory.
FEATURE = features.builtin_spec(NAME)
factory = CgroupReconcile  # unbound; the agent binds its Handle after parsing the flags

__all__ = ["FEATURE", "NAME", "CgroupReconcile", "MemoryQoS", "factory", "pod_memory_qos"]
