"""PodLifeTime: evicts pods by age, state, condition or exit code
(kubernetes-sigs/descheduler).

Exports the plugin's name, Args and extension points for the config loader, and
the plugin class and its factory for the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.podlifetime.args import PodLifeTimeArgs
from descheduler.plugins.podlifetime.plugin import PodLifeTime, factory

NAME = "PodLifeTime"
Args = PodLifeTimeArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.DESCHEDULE})

__all__ = ["EXTENSION_POINTS", "NAME", "Args", "PodLifeTime", "PodLifeTimeArgs", "factory"]
