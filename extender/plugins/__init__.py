"""The in-tree scheduler plugins, and `registry()`: every plugin the extender can run.

`IN_TREE` holds the same name → "module" lines as pyproject.toml's
`[project.entry-points."nodeqos.scheduler.plugins"]` (tests/extender/test_framework_registry.py
keeps them equal); `registry()` loads them through the same path as the
installed entry points of other packages (`extender.framework.registry`).
"""

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from extender.framework import registry as framework_registry

IN_TREE: Mapping[str, str] = MappingProxyType(
    {
        "LoadAwareScheduling": "extender.plugins.loadaware",
    }
)


def registry(
    extra: Iterable[object] = (), *, installed: bool = True
) -> framework_registry.Registry:
    """In-tree plugins, then installed entry points (unless `installed` is False), then `extra`."""
    return framework_registry.discover(IN_TREE, extra, entry_points=None if installed else ())


__all__ = ["IN_TREE", "registry"]
