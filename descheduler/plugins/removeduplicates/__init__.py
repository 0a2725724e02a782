"""RemoveDuplicates: spreads replicas of one owner across nodes
(kubernetes-sigs/descheduler).

Exports the plugin's name, Args and extension points for the config loader,
and the plugin class and its factory for the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.removeduplicates.args import RemoveDuplicatesArgs
from descheduler.plugins.removeduplicates.plugin import RemoveDuplicates, factory

NAME = "RemoveDuplicates"
Args = RemoveDuplicatesArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.BALANCE})

__all__ = [
    "EXTENSION_POINTS",
    "NAME",
    "Args",
    "RemoveDuplicates",
    "RemoveDuplicatesArgs",
    "factory",
]
