"""RemovePodsViolatingInterPodAntiAffinity: evicts pods that violate
inter-pod anti-affinity (kubernetes-sigs/descheduler).

Exports the plugin's name, Args and extension points for the config loader, and
the plugin class and its factory for the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.removepodsviolatinginterpodantiaffinity.args import (
    RemovePodsViolatingInterPodAntiAffinityArgs,
)
from descheduler.plugins.removepodsviolatinginterpodantiaffinity.plugin import (
    RemovePodsViolatingInterPodAntiAffinity,
    factory,
)

NAME = "RemovePodsViolatingInterPodAntiAffinity"
Args = RemovePodsViolatingInterPodAntiAffinityArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.DESCHEDULE})

__all__ = [
    "EXTENSION_POINTS",
    "NAME",
    "Args",
    "RemovePodsViolatingInterPodAntiAffinity",
    "RemovePodsViolatingInterPodAntiAffinityArgs",
    "factory",
]
