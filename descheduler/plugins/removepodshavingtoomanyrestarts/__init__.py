"""RemovePodsHavingTooManyRestarts: evicts pods restarting too often
(kubernetes-sigs/descheduler).

Declares the plugin's name, Args and extension points for the config loader;
the plugin class arrives with the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.removepodshavingtoomanyrestarts.args import (
    RemovePodsHavingTooManyRestartsArgs,
)

NAME = "RemovePodsHavingTooManyRestarts"
Args = RemovePodsHavingTooManyRestartsArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.DESCHEDULE})

__all__ = ["EXTENSION_POINTS", "NAME", "Args", "RemovePodsHavingTooManyRestartsArgs"]
