"""RemovePodsHavingTooManyRestarts: evicts pods restarting too often
(kubernetes-sigs/descheduler).

Exports the plugin's name, Args and extension points for the config loader, and
the plugin class and its factory for the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.removepodshavingtoomanyrestarts.args import (
    RemovePodsHavingTooManyRestartsArgs,
)
from descheduler.plugins.removepodshavingtoomanyrestarts.plugin import (
    RemovePodsHavingTooManyRestarts,
    factory,
)

NAME = "RemovePodsHavingTooManyRestarts"
Args = RemovePodsHavingTooManyRestartsArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.DESCHEDULE})

__all__ = [
    "EXTENSION_POINTS",
    "NAME",
    "Args",
    "RemovePodsHavingTooManyRestarts",
    "RemovePodsHavingTooManyRestartsArgs",
    "factory",
]
