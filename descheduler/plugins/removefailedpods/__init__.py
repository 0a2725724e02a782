"""RemoveFailedPods: evicts failed pods (kubernetes-sigs/descheduler).

Declares the plugin's name, Args and extension points for the config loader;
the plugin class arrives with the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.removefailedpods.args import RemoveFailedPodsArgs

NAME = "RemoveFailedPods"
Args = RemoveFailedPodsArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.DESCHEDULE})

__all__ = ["EXTENSION_POINTS", "NAME", "Args", "RemoveFailedPodsArgs"]
