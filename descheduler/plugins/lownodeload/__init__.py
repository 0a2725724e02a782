"""LowNodeLoad: moves pods off nodes whose measured load (NodeMetric) is above the
high marks, towards nodes below the low marks (Koordinator).

Declares the plugin's name, Args and extension points for the config loader;
the plugin class arrives with the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.lownodeload.args import LowNodeLoadArgs

NAME = "LowNodeLoad"
Args = LowNodeLoadArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.BALANCE})

__all__ = ["EXTENSION_POINTS", "NAME", "Args", "LowNodeLoadArgs"]
