"""CustomPriority: moves pods from expensive nodes to cheaper ones, in a user-given
order of node levels (Koordinator v1.8).

Exports the plugin's name, Args and extension points for the config loader,
and the plugin class and its factory for the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.custompriority.args import CustomPriorityArgs, Mode
from descheduler.plugins.custompriority.plugin import CustomPriority, factory

NAME = "CustomPriority"
Args = CustomPriorityArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.BALANCE})

__all__ = [
    "EXTENSION_POINTS",
    "NAME",
    "Args",
    "CustomPriority",
    "CustomPriorityArgs",
    "Mode",
    "factory",
]
