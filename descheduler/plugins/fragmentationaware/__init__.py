"""FragmentationAware: evicts the pod that best evens out a node whose requests
are lopsided across resources (Koordinator `main` after v1.8).

Exports the plugin's name, Args and extension points for the config loader,
and the plugin class and its factory for the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.fragmentationaware.args import FragmentationAwareArgs
from descheduler.plugins.fragmentationaware.plugin import FragmentationAware, factory

NAME = "FragmentationAware"
Args = FragmentationAwareArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.BALANCE})

__all__ = [
    "EXTENSION_POINTS",
    "NAME",
    "Args",
    "FragmentationAware",
    "FragmentationAwareArgs",
    "factory",
]
