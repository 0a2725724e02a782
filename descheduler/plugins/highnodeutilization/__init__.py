"""HighNodeUtilization: empties under-used nodes so pods pack onto
fewer nodes (kubernetes-sigs/descheduler).

Declares the plugin's name, Args and extension points for the config loader;
the plugin class arrives with the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.highnodeutilization.args import HighNodeUtilizationArgs

NAME = "HighNodeUtilization"
Args = HighNodeUtilizationArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.BALANCE})

__all__ = ["EXTENSION_POINTS", "NAME", "Args", "HighNodeUtilizationArgs"]
