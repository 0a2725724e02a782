"""RemovePodsViolatingInterPodAntiAffinity: evicts pods that violate
inter-pod anti-affinity (kubernetes-sigs/descheduler).

Declares the plugin's name, Args and extension points for the config loader;
the plugin class arrives with the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.removepodsviolatinginterpodantiaffinity.args import (
    RemovePodsViolatingInterPodAntiAffinityArgs,
)

NAME = "RemovePodsViolatingInterPodAntiAffinity"
Args = RemovePodsViolatingInterPodAntiAffinityArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.DESCHEDULE})

__all__ = ["EXTENSION_POINTS", "NAME", "Args", "RemovePodsViolatingInterPodAntiAffinityArgs"]
