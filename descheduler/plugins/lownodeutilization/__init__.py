"""LowNodeUtilization: moves pods from nodes requested above
targetThresholds to nodes below thresholds (kubernetes-sigs/descheduler).

Declares the plugin's name, Args and extension points for the config loader;
the plugin class arrives with the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.lownodeutilization.args import LowNodeUtilizationArgs

NAME = "LowNodeUtilization"
Args = LowNodeUtilizationArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.BALANCE})

__all__ = ["EXTENSION_POINTS", "NAME", "Args", "LowNodeUtilizationArgs"]
