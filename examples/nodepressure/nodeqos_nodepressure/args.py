"""NodePressureArgs: which conditions count as pressure, which pods go, how many per node.

Declared like every in-tree Args: a frozen dataclass whose fields carry their
YAML key and codec, so unknown keys, wrong types and bad values are reported
with their field path by the descheduler's own config loader.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import ClassVar

from descheduler.config import FieldPath, codecs, common, fields
from descheduler.config.errors import Errors
from kube import classify


class Pressure(enum.StrEnum):
    """The kubelet's node pressure conditions (v1.NodeConditionType)."""

    MEMORY = "MemoryPressure"
    DISK = "DiskPressure"
    PID = "PIDPressure"


@dataclass(frozen=True, kw_only=True, slots=True)
class NodePressureArgs(common.PodScopeArgs):
    """`namespaces` and `labelSelector` (from PodScopeArgs) limit the pods considered."""

    KIND: ClassVar[str] = "NodePressureArgs"

    conditions: tuple[Pressure, ...] = field(
        default=(Pressure.MEMORY,),
        metadata=fields.spec("conditions", codecs.ListOf(codecs.Choice(Pressure))),
    )
    qos_classes: tuple[classify.KoordQOS, ...] = field(
        default=(classify.KoordQOS.BE,),
        metadata=fields.spec("qosClasses", codecs.ListOf(codecs.Choice(classify.KoordQOS))),
    )
    max_pods_per_node: int = field(
        default=2, metadata=fields.spec("maxPodsPerNode", codecs.POSITIVE)
    )

    def check(self, path: FieldPath, errors: Errors, failed: frozenset[str]) -> None:
        """Empty lists would make the plugin do nothing, silently: refuse them."""
        if "conditions" not in failed and not self.conditions:
            errors.add(path.child("conditions"), "must name at least one condition")
        if "qosClasses" not in failed and not self.qos_classes:
            errors.add(path.child("qosClasses"), "must name at least one QoS class")
