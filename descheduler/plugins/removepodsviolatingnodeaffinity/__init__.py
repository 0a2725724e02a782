"""RemovePodsViolatingNodeAffinity: evicts pods whose node no longer satisfies
their node affinity (kubernetes-sigs/descheduler).

Exports the plugin's name, Args and extension points for the config loader, and
the plugin class and its factory for the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.removepodsviolatingnodeaffinity.args import (
    RemovePodsViolatingNodeAffinityArgs,
)
from descheduler.plugins.removepodsviolatingnodeaffinity.plugin import (
    RemovePodsViolatingNodeAffinity,
    factory,
)

NAME = "RemovePodsViolatingNodeAffinity"
Args = RemovePodsViolatingNodeAffinityArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.DESCHEDULE})

__all__ = [
    "EXTENSION_POINTS",
    "NAME",
    "Args",
    "RemovePodsViolatingNodeAffinity",
    "RemovePodsViolatingNodeAffinityArgs",
    "factory",
]
