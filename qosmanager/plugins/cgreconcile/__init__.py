"""CgroupReconcile: memory QoS (memory.min/low/high) per Koordinator QoS class."""

from qosmanager.plugins.cgreconcile.plugin import NAME, CgroupReconcile, MemoryQoS, pod_memory_qos

__all__ = ["NAME", "CgroupReconcile", "MemoryQoS", "pod_memory_qos"]
