"""The in-tree descheduler plugins.

Each plugin is a package exporting `NAME`, `Args` and `EXTENSION_POINTS`
(plugin classes and factories come with the framework). `in_tree()` is the one
list of them; the config loader checks profiles against it, and the framework's
Registry extends its entries with factories.
"""

from collections.abc import Mapping

from descheduler.config import catalog
from descheduler.plugins import (
    defaultevictor,
    highnodeutilization,
    lownodeload,
    lownodeutilization,
    migrationcontroller,
    podlifetime,
    removeduplicates,
    removefailedpods,
    removepodshavingtoomanyrestarts,
    removepodsviolatinginterpodantiaffinity,
    removepodsviolatingnodeaffinity,
    removepodsviolatingnodetaints,
    removepodsviolatingtopologyspreadconstraint,
)

_MODULES = (
    lownodeload,
    migrationcontroller,
    defaultevictor,
    removeduplicates,
    lownodeutilization,
    highnodeutilization,
    removepodsviolatinginterpodantiaffinity,
    removepodsviolatingnodeaffinity,
    removepodsviolatingnodetaints,
    removepodsviolatingtopologyspreadconstraint,
    removepodshavingtoomanyrestarts,
    podlifetime,
    removefailedpods,
)


def in_tree() -> Mapping[str, catalog.PluginSpec]:
    """Every in-tree plugin by name: its Args type and extension points."""
    return catalog.build(
        catalog.PluginSpec(module.NAME, module.Args, module.EXTENSION_POINTS) for module in _MODULES
    )


__all__ = ["in_tree"]
