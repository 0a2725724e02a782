"""What the loader must know about each plugin: its name, Args type and extension points.

The plugin packages (in-tree under `descheduler.plugins`, out-of-tree anywhere,
found through the `ENTRY_POINT_GROUP` entry points) declare `NAME`, `Args` and
`EXTENSION_POINTS`; the framework's Registry gathers them and hands the loader
its `catalog()` to check profiles against. The config package never imports a
plugin itself (as upstream descheduler keeps its API types free of plugin
imports): the catalog is always passed in.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from descheduler.config import fields

# Where a package declares its descheduler plugins (docs/plugins.md).
ENTRY_POINT_GROUP = "nodeqos.descheduler.plugins"


class ExtensionPoint(enum.StrEnum):
    """Where a profile can enable a plugin, named as in the YAML `plugins` block.

    `deschedule`, `balance`, `evict`, `filter` are Koordinator's points;
    `preSort`, `sort`, `preEvictionFilter` come from kubernetes-sigs/descheduler
    (whose JSON tags are all lower case: `presort`, `preevictionfilter`; both
    spellings are read, the camel case one is written).
    """

    PRE_SORT = "preSort"
    SORT = "sort"
    DESCHEDULE = "deschedule"
    BALANCE = "balance"
    EVICT = "evict"
    FILTER = "filter"
    PRE_EVICTION_FILTER = "preEvictionFilter"


# YAML spelling -> point, including upstream's lower-case JSON tags.
POINT_KEYS: Mapping[str, ExtensionPoint] = MappingProxyType(
    {
        **{point.value: point for point in ExtensionPoint},
        "presort": ExtensionPoint.PRE_SORT,
        "preevictionfilter": ExtensionPoint.PRE_EVICTION_FILTER,
    }
)


@dataclass(frozen=True, slots=True)
class PluginSpec:
    """One plugin as the config loader sees it."""

    name: str
    args: type[fields.PluginArgs]
    extension_points: frozenset[ExtensionPoint]


def build(specs: Iterable[PluginSpec]) -> Mapping[str, PluginSpec]:
    """Index specs by name; a name given twice is a programming error."""
    catalog: dict[str, PluginSpec] = {}
    for spec in specs:
        if spec.name in catalog:
            raise ValueError(f"plugin name {spec.name!r} is registered twice")
        catalog[spec.name] = spec
    return MappingProxyType(catalog)
