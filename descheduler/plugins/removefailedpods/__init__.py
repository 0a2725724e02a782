"""RemoveFailedPods: evicts failed pods (kubernetes-sigs/descheduler).

Exports the plugin's name, Args and extension points for the config loader, and
the plugin class and its factory for the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.removefailedpods.args import RemoveFailedPodsArgs
from descheduler.plugins.removefailedpods.plugin import RemoveFailedPods, factory

NAME = "RemoveFailedPods"
Args = RemoveFailedPodsArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.DESCHEDULE})

__all__ = [
    "EXTENSION_POINTS",
    "NAME",
    "Args",
    "RemoveFailedPods",
    "RemoveFailedPodsArgs",
    "factory",
]
