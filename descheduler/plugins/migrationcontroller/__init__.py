"""MigrationController: Koordinator's evictor, with migration limits and rate limiting
(evict and filter; its filter also serves preEvictionFilter).

An eviction becomes a PodMigrationJob (`scheduling.koordinator.sh/v1alpha1`)
that the plugin's own controller arbitrates, rate-limits and carries out on
the leader. Exports the plugin's name, Args and extension points for the
config loader, and the plugin class and its factory for the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.migrationcontroller.args import MigrationControllerArgs
from descheduler.plugins.migrationcontroller.plugin import NAME, MigrationController, factory

Args = MigrationControllerArgs
EXTENSION_POINTS = frozenset(
    {ExtensionPoint.EVICT, ExtensionPoint.FILTER, ExtensionPoint.PRE_EVICTION_FILTER}
)

__all__ = [
    "EXTENSION_POINTS",
    "NAME",
    "Args",
    "MigrationController",
    "MigrationControllerArgs",
    "factory",
]
