"""DefaultEvictor: decides which pods may be evicted (upstream: filter and
preEvictionFilter; Koordinator's adaptor also serves evict).

Exports the plugin's name, Args and extension points for the config loader, and
the plugin class and its factory for the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.defaultevictor.args import DefaultEvictorArgs
from descheduler.plugins.defaultevictor.plugin import DefaultEvictor, factory

NAME = "DefaultEvictor"
Args = DefaultEvictorArgs
EXTENSION_POINTS = frozenset(
    {ExtensionPoint.FILTER, ExtensionPoint.PRE_EVICTION_FILTER, ExtensionPoint.EVICT}
)

__all__ = ["EXTENSION_POINTS", "NAME", "Args", "DefaultEvictor", "DefaultEvictorArgs", "factory"]
