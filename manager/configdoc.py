"""The shared pieces of a Koordinator config document: problems, node profiles, parsing.

`manager.sloconfig` (the NodeSLO keys) and `manager.collectpolicy`
(`colocation-config`) read their JSON documents with these; a `Sink` collects
one key's errors and warnings as "field.path: what".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kube import selectors

__all__ = ["NodeStrategy", "Problem", "Sink", "document", "list_field", "profile"]

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the ConfigMap: the key and a "field.path: what" message."""

    key: str
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class NodeStrategy(Generic[S]):
    """A node strategy, already merged over the cluster strategy."""

    name: str
    selector: selectors.LabelSelector
    strategy: S


class Sink:
    """Collects errors and warnings of one key."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.errors: list[Problem] = []
        self.warnings: list[Problem] = []

    def add(self, messages: Sequence[str]) -> None:
        for message in messages:
            target = self.warnings if ": unknown field" in message else self.errors
            target.append(Problem(self.key, message))

    def error(self, message: str) -> None:
        self.errors.append(Problem(self.key, message))


def document(text: Any, sink: Sink) -> dict[str, Any] | None:
    if not isinstance(text, str):
        sink.error(f"{sink.key}: must be a string holding a JSON object")
        return None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        sink.error(f"{sink.key}: invalid JSON at line {err.lineno} column {err.colno}: {err.msg}")
        return None
    if not isinstance(doc, dict):
        sink.error(f"{sink.key}: must be a JSON object")
        return None
    return doc


def profile(raw: Any, path: str, sink: Sink) -> tuple[str, selectors.LabelSelector] | None:
    """`name` and `nodeSelector` of a node strategy (NodeCfgProfile)."""
    if not isinstance(raw, Mapping):
        sink.error(f"{path}: must be an object")
        return None
    name = raw.get("name") or ""
    if not isinstance(name, str):
        sink.error(f"{path}.name: must be a string")
        return None
    sel = raw.get("nodeSelector")
    if sel is not None and not isinstance(sel, Mapping):
        sink.error(f"{path}.nodeSelector: must be a label selector object")
        return None
    try:
        return name, selectors.LabelSelector.from_api(sel, f"{path}.nodeSelector")
    except (ValueError, TypeError, AttributeError) as err:
        sink.error(str(err) if isinstance(err, ValueError) else f"{path}.nodeSelector: {err}")
        return None


def list_field(doc: Mapping[str, Any], name: str, path: str, sink: Sink) -> list[Any]:
    found = doc.get(name)
    if found is None:
        return []
    if not isinstance(found, list):
        sink.error(f"{path}.{name}: must be a list")
        return []
    return found
