"""RemovePodsViolatingTopologySpreadConstraint: evicts pods to
restore topology spread (kubernetes-sigs/descheduler).

Exports the plugin's name, Args and extension points for the config loader,
and the plugin class and its factory for the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.removepodsviolatingtopologyspreadconstraint.args import (
    RemovePodsViolatingTopologySpreadConstraintArgs,
)
from descheduler.plugins.removepodsviolatingtopologyspreadconstraint.plugin import (
    RemovePodsViolatingTopologySpreadConstraint,
    factory,
)

NAME = "RemovePodsViolatingTopologySpreadConstraint"
Args = RemovePodsViolatingTopologySpreadConstraintArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.BALANCE})

__all__ = [
    "EXTENSION_POINTS",
    "NAME",
    "Args",
    "RemovePodsViolatingTopologySpreadConstraint",
    "RemovePodsViolatingTopologySpreadConstraintArgs",
    "factory",
]
