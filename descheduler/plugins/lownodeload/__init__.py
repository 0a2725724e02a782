"""LowNodeLoad: moves pods off nodes whose measured load (NodeMetric) is above the
high marks, towards nodes below the low marks (Koordinator).

Exports the plugin's name, Args and extension points for the config loader, and
the plugin class and its factory for the framework. The maths lives in the
pure modules (`plan` and what it calls); `plugin` connects it to the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.lownodeload.args import LowNodeLoadArgs
from descheduler.plugins.lownodeload.plugin import NAME, LowNodeLoad, factory

Args = LowNodeLoadArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.BALANCE})

__all__ = ["EXTENSION_POINTS", "NAME", "Args", "LowNodeLoad", "LowNodeLoadArgs", "factory"]
