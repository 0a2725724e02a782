"""PodLifeTime: evicts pods by age, state, condition or exit code
(kubernetes-sigs/descheduler).

Declares the plugin's name, Args and extension points for the config loader;
the plugin class arrives with the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.podlifetime.args import PodLifeTimeArgs

NAME = "PodLifeTime"
Args = PodLifeTimeArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.DESCHEDULE})

__all__ = ["EXTENSION_POINTS", "NAME", "Args", "PodLifeTimeArgs"]
