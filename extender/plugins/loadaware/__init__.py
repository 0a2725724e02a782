"""LoadAwareScheduling, the in-tree scheduler plugin: Koordinator's load-aware filter and score.

The plugin surface every scheduler plugin exports (`extender.framework.registry`):
`NAME`, `Args` (LoadAwareSchedulingArgs, `extender.args`), `EXTENSION_POINTS`
and `factory(args, handle)`. The maths and the per-node caches stay in
`extender.view` / `extender.nodeload` / `extender.loads`.
"""

from extender.args import LoadAwareArgs as Args
from extender.framework.interfaces import ExtensionPoint
from extender.plugins.loadaware.plugin import LoadAwareScheduling, factory, wrap

NAME = "LoadAwareScheduling"
EXTENSION_POINTS = frozenset({ExtensionPoint.FILTER, ExtensionPoint.SCORE})

__all__ = ["EXTENSION_POINTS", "NAME", "Args", "LoadAwareScheduling", "factory", "wrap"]
