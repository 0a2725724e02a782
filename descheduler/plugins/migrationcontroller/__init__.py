"""MigrationController: Koordinator's evictor, with migration limits and rate limiting
(evict and filter; its filter also serves preEvictionFilter).

Declares the plugin's name, Args and extension points for the config loader;
the plugin class arrives with the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.migrationcontroller.args import MigrationControllerArgs

NAME = "MigrationController"
Args = MigrationControllerArgs
EXTENSION_POINTS = frozenset(
    {ExtensionPoint.EVICT, ExtensionPoint.FILTER, ExtensionPoint.PRE_EVICTION_FILTER}
)

__all__ = ["EXTENSION_POINTS", "NAME", "Args", "MigrationControllerArgs"]
