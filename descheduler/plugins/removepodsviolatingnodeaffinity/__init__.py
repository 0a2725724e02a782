"""RemovePodsViolatingNodeAffinity: evicts pods whose node no longer satisfies
their node affinity (kubernetes-sigs/descheduler).

Declares the plugin's name, Args and extension points for the config loader;
the plugin class arrives with the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.removepodsviolatingnodeaffinity.args import (
    RemovePodsViolatingNodeAffinityArgs,
)

NAME = "RemovePodsViolatingNodeAffinity"
Args = RemovePodsViolatingNodeAffinityArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.DESCHEDULE})

__all__ = ["EXTENSION_POINTS", "NAME", "Args", "RemovePodsViolatingNodeAffinityArgs"]
