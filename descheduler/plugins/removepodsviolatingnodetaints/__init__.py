"""RemovePodsViolatingNodeTaints: evicts pods that do not tolerate their node's
taints (kubernetes-sigs/descheduler).

Declares the plugin's name, Args and extension points for the config loader;
the plugin class arrives with the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.removepodsviolatingnodetaints.args import RemovePodsViolatingNodeTaintsArgs

NAME = "RemovePodsViolatingNodeTaints"
Args = RemovePodsViolatingNodeTaintsArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.DESCHEDULE})

__all__ = ["EXTENSION_POINTS", "NAME", "Args", "RemovePodsViolatingNodeTaintsArgs"]
