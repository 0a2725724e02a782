"""RemovePodsViolatingNodeTaints: evicts pods that do not tolerate their node's
taints (kubernetes-sigs/descheduler).

Exports the plugin's name, Args and extension points for the config loader, and
the plugin class and its factory for the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.removepodsviolatingnodetaints.args import RemovePodsViolatingNodeTaintsArgs
from descheduler.plugins.removepodsviolatingnodetaints.plugin import (
    RemovePodsViolatingNodeTaints,
    factory,
)

NAME = "RemovePodsViolatingNodeTaints"
Args = RemovePodsViolatingNodeTaintsArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.DESCHEDULE})

__all__ = [
    "EXTENSION_POINTS",
    "NAME",
    "Args",
    "RemovePodsViolatingNodeTaints",
    "RemovePodsViolatingNodeTaintsArgs",
    "factory",
]
