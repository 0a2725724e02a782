"""BEMemoryEvict: evict best-effort pods when node memory crosses its threshold."""

from qosmanager.plugins.memoryevict import select
from qosmanager.plugins.memoryevict.plugin import NAME, MemoryEvict

__all__ = ["NAME", "MemoryEvict", "select"]
