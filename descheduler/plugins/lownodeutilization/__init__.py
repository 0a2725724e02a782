"""LowNodeUtilization: moves pods from nodes requested above
targetThresholds to nodes below thresholds (kubernetes-sigs/descheduler).

Exports the plugin's name, Args and extension points for the config loader,
and the plugin class and its factory for the framework. Its `classify`,
`order`, `meter` and `destinations` modules also serve HighNodeUtilization
(upstream's shared `nodeutilization` package).
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.lownodeutilization.args import LowNodeUtilizationArgs
from descheduler.plugins.lownodeutilization.plugin import LowNodeUtilization, factory

NAME = "LowNodeUtilization"
Args = LowNodeUtilizationArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.BALANCE})

__all__ = [
    "EXTENSION_POINTS",
    "NAME",
    "Args",
    "LowNodeUtilization",
    "LowNodeUtilizationArgs",
    "factory",
]
