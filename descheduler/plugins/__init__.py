"""The in-tree descheduler plugins, and `registry()`: every plugin the descheduler can run.

Each plugin is a package exporting `NAME`, `Args`, `EXTENSION_POINTS`, its
plugin class and `factory(args, handle)` - the surface an out-of-tree plugin
exports too (`descheduler.framework.discovery`). `IN_TREE` lists them as the
entry points pyproject.toml declares for nodeqos itself (name → "module");
`registry()` loads them through the same path as the installed entry points
of other packages and the plugins an embedder passes, so there is one
mechanism. The table is here, not only in the installed metadata, because that
metadata may describe another checkout (see `framework.discovery`).

    registry = plugins.registry()                 # in-tree + installed
    cfg = config.load_config(path, plugins=registry.catalog())
"""

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from descheduler.config import catalog
from descheduler.framework import discovery
from descheduler.framework import registry as framework_registry

# name → module; the same lines as [project.entry-points."nodeqos.descheduler.plugins"].
IN_TREE: Mapping[str, str] = MappingProxyType(
    {
        "LowNodeLoad": "descheduler.plugins.lownodeload",
        "MigrationController": "descheduler.plugins.migrationcontroller",
        "DefaultEvictor": "descheduler.plugins.defaultevictor",
        "RemoveDuplicates": "descheduler.plugins.removeduplicates",
        "LowNodeUtilization": "descheduler.plugins.lownodeutilization",
        "HighNodeUtilization": "descheduler.plugins.highnodeutilization",
        "RemovePodsViolatingInterPodAntiAffinity": (
            "descheduler.plugins.removepodsviolatinginterpodantiaffinity"
        ),
        "RemovePodsViolatingNodeAffinity": "descheduler.plugins.removepodsviolatingnodeaffinity",
        "RemovePodsViolatingNodeTaints": "descheduler.plugins.removepodsviolatingnodetaints",
        "RemovePodsViolatingTopologySpreadConstraint": (
            "descheduler.plugins.removepodsviolatingtopologyspreadconstraint"
        ),
        "RemovePodsHavingTooManyRestarts": "descheduler.plugins.removepodshavingtoomanyrestarts",
        "PodLifeTime": "descheduler.plugins.podlifetime",
        "RemoveFailedPods": "descheduler.plugins.removefailedpods",
        "CustomPriority": "descheduler.plugins.custompriority",
        "FragmentationAware": "descheduler.plugins.fragmentationaware",
    }
)


def registry(
    extra: Iterable[object] = (), *, installed: bool = True
) -> framework_registry.Registry:
    """Every plugin: in-tree, then installed entry points (unless `installed` is False), then `extra`.

    `extra` holds plugin objects exporting the plugin surface (usually their
    modules), for `descheduler.run(argv, plugins=[...])` and tests.
    """
    return discovery.registry(IN_TREE, extra, entry_points=None if installed else ())


def in_tree() -> Mapping[str, catalog.PluginSpec]:
    """Every in-tree plugin by name: its Args type and extension points."""
    return registry(installed=False).catalog()


__all__ = ["IN_TREE", "in_tree", "registry"]
