"""RemovePodsViolatingTopologySpreadConstraint: evicts pods to
restore topology spread (kubernetes-sigs/descheduler).

Declares the plugin's name, Args and extension points for the config loader;
the plugin class arrives with the framework.
"""

from descheduler.config.catalog import ExtensionPoint
from descheduler.plugins.removepodsviolatingtopologyspreadconstraint.args import (
    RemovePodsViolatingTopologySpreadConstraintArgs,
)

NAME = "RemovePodsViolatingTopologySpreadConstraint"
Args = RemovePodsViolatingTopologySpreadConstraintArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.BALANCE})

__all__ = ["EXTENSION_POINTS", "NAME", "Args", "RemovePodsViolatingTopologySpreadConstraintArgs"]
