"""BEMemoryEvict: evict best-effort pods when node memory crosses its threshold."""

from qosmanager import features
from qosmanager.plugins.memoryevict import select
from qosmanager.plugins.memoryevict.plugin import NAME, MemoryEvict

# The QoS plugin surface (qosmanager.discovery): gate name, gate spec, factory.
FEATURE = features.builtin_spec(NAME)
factory = MemoryEvict  # unbound; the agent binds its Handle after parsing the flags

__all__ = ["FEATURE", "NAME", "MemoryEvict", "factory", "select"]
