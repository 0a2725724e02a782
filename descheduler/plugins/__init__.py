"""The in-tree descheduler plugins.

Each plugin is a package exporting `NAME`, `Args` and `EXTENSION_POINTS`, and,
once its logic is written, its plugin class and `factory(args, handle)`.
`in_tree()` is the one list of them; the config loader checks profiles against
it, and `registry()` extends its entries with the factories for the framework
(a plugin without a `factory` is known to the config but "not implemented yet").
"""

from collections.abc import Mapping

from descheduler.config import catalog
from descheduler.framework import registry as framework_registry
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


def registry() -> framework_registry.Registry:
    """The in-tree plugins with their factories, for `framework.Runner.from_config`."""
    found = framework_registry.Registry()
    for module in _MODULES:
        found.register(
            module.NAME,
            getattr(module, "factory", None),
            args=module.Args,
            extension_points=module.EXTENSION_POINTS,
        )
    return found


__all__ = ["in_tree", "registry"]
