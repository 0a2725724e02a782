"""The extender's scheduling framework: scheduler plugins in Python, loaded without a rebuild.

Layering: may import `kube` and `extender.protocol`-level stdlib code; never
`extender.view`/`loads`/`nodeload` (those belong to the in-tree plugin,
`extender.plugins.loadaware`, which imports this package, not the reverse).

- `interfaces`: the extension-point Protocols, `Handle`, `ArgsError`, `GROUP`.
- `registry`: plugins found through the entry-point group `nodeqos.scheduler.plugins`.
- `config`: the profile file (and a bare LoadAwareSchedulingArgs file, as before).
- `runner`: `Framework`, the filter and prioritize calls with each plugin isolated; `build`.
- `watch`: the list-watch caches plugins subscribe to, shared between them.
"""

from extender.framework.config import Enabled, Profile, decode_config, load_config
from extender.framework.interfaces import (
    GROUP,
    MAX_NODE_SCORE,
    ArgsError,
    ExtensionPoint,
    Handle,
    InvalidPod,
    Refusals,
)
from extender.framework.registry import Registry, discover
from extender.framework.runner import Framework, Slot, build
from extender.framework.watch import Watches

__all__ = [
    "GROUP",
    "MAX_NODE_SCORE",
    "ArgsError",
    "Enabled",
    "ExtensionPoint",
    "Framework",
    "Handle",
    "InvalidPod",
    "Profile",
    "Refusals",
    "Registry",
    "Slot",
    "Watches",
    "build",
    "decode_config",
    "discover",
    "load_config",
]
