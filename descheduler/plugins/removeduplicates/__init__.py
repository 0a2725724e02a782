"""RemoveDuplicates: spreads replicas of one owner across nodes
(kubernetes-sigs/descheduler).

Declares the plugin's name, Args and extension points for the config loader;
the plugin class arrives with the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.removeduplicates.args import RemoveDuplicatesArgs

NAME = "RemoveDuplicates"
Args = RemoveDuplicatesArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.BALANCE})

__all__ = ["EXTENSION_POINTS", "NAME", "Args", "RemoveDuplicatesArgs"]
