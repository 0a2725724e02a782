"""HighNodeUtilization: empties under-used nodes so pods pack onto
fewer nodes (kubernetes-sigs/descheduler).

Exports the plugin's name, Args and extension points for the config loader,
and the plugin class and its factory for the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.highnodeutilization.args import HighNodeUtilizationArgs
from descheduler.plugins.highnodeutilization.plugin import HighNodeUtilization, factory

NAME = "HighNodeUtilization"
Args = HighNodeUtilizationArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.BALANCE})

__all__ = [
    "EXTENSION_POINTS",
    "NAME",
    "Args",
    "HighNodeUtilization",
    "HighNodeUtilizationArgs",
    "factory",
]
