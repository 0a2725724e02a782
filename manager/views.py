"""What the reconciler keeps of the objects it watches, and the patches it sends.

Slim views of Nodes and of NodeSLOs / NodeMetrics (`manager.reconcile` builds
its informers with them), the RFC 7386 merge patch between a stored spec and a
rendered one, and the ownerReferences a managed object should carry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from manager import render

__all__ = ["NodeView", "Stored", "merge_patch", "owner_refs"]


@dataclass(frozen=True, slots=True)
class NodeView:
    """What the manager keeps of a Node."""

    name: str
    uid: str
    labels: Mapping[str, str]
    bandwidth: str | None = None  # render.BANDWIDTH_ANNOTATION, when valid

    @classmethod
    def from_api(cls, obj: Mapping[str, Any]) -> NodeView:
        meta = obj["metadata"]
        return cls(
            meta["name"],
            meta.get("uid", ""),
            MappingProxyType(dict(meta.get("labels") or {})),
            render.node_bandwidth(meta.get("annotations") or {}),
        )


@dataclass(frozen=True, slots=True)
class Stored:
    """What the manager keeps of a NodeSLO or NodeMetric: metadata it needs and the spec."""

    name: str
    resource_version: str
    annotations: Mapping[str, str]
    owner_references: tuple[Mapping[str, Any], ...]
    spec: Mapping[str, Any]

    @classmethod
    def from_api(cls, obj: Mapping[str, Any]) -> Stored:
        meta = obj["metadata"]
        return cls(
            meta["name"],
            str(meta.get("resourceVersion", "")),
            MappingProxyType(dict(meta.get("annotations") or {})),
            tuple(meta.get("ownerReferences") or ()),
            obj.get("spec") or {},
        )

    @property
    def opted_out(self) -> bool:
        return self.annotations.get(render.OPT_OUT_ANNOTATION) == "false"

    def owned_by_node(self) -> bool:
        return any(
            ref.get("kind") == "Node" and ref.get("name") == self.name
            for ref in self.owner_references
        )


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The RFC 7386 merge patch that turns `old` into `new` (removed keys become null)."""
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(before, Mapping) and isinstance(value, Mapping):
            inner = merge_patch(before, value)
            if inner:
                patch[key] = inner
        elif before != value or key not in old:
            patch[key] = value
    return patch


def owner_refs(stored: Stored, node: NodeView) -> list[Mapping[str, Any]] | None:
    """The ownerReferences with ours pointing at this Node's uid; None when already so."""
    ours = render.owner_reference(node.name, node.uid)
    others = [r for r in stored.owner_references if r.get("kind") != "Node"]
    current = [r for r in stored.owner_references if r.get("kind") == "Node"]
    if len(current) == 1 and current[0].get("uid") == node.uid:
        return None
    return [*others, ours]
