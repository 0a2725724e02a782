"""Reading a cluster snapshot for `simulate`: `kubectl get -o yaml` output, as saved.

A snapshot file holds Nodes, Pods, NodeMetrics and PodDisruptionBudgets (and,
optionally, Namespaces and PriorityClasses) as the API server returns them:
one `kind: List` (`kubectl get nodes,pods,pdb,nodemetrics -A -o yaml`), or
several YAML documents, each a List or a single object (the outputs of several
`kubectl get` commands joined with `---`). Objects of other kinds are skipped
and counted.
"""

from __future__ import annotations

import os
import pathlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from descheduler import framework

KINDS = frozenset(
    {"Node", "Pod", "NodeMetric", "PodDisruptionBudget", "Namespace", "PriorityClass"}
)


class SnapshotError(Exception):
    """The snapshot file is unusable; `problems` says why (exit status 2)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(problems))


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The file's objects as a `StaticSource`, and what was skipped."""

    source: framework.StaticSource
    skipped_kinds: Mapping[str, int]


def load(path: str | os.PathLike[str]) -> Snapshot:
    """Parse and check the whole file; raises SnapshotError listing every bad object."""
    where = os.fspath(path)
    try:
        text = pathlib.Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SnapshotError([f"{where}: no such file"]) from None
    except (OSError, UnicodeDecodeError) as err:
        raise SnapshotError([f"{where}: cannot read: {err}"]) from None
    try:
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise SnapshotError([f"{where}: {at}{err.problem or err.context}"]) from None
    except yaml.YAMLError as err:
        raise SnapshotError([f"{where}: invalid YAML: {err}"]) from None
    problems: list[str] = []
    items: list[tuple[str, Mapping[str, Any]]] = []
    for number, document in enumerate(documents):
        at = f"{where}: document {number + 1}" if len(documents) > 1 else where
        if not isinstance(document, Mapping):
            problems.append(f"{at}: must be a Kubernetes object or a List, not {_type(document)}")
        elif document.get("kind") == "List" or (
            str(document.get("kind", "")).endswith("List") and "items" in document
        ):
            listed = document.get("items") or []
            if not isinstance(listed, list):
                problems.append(f"{at}: items must be a list, not {_type(listed)}")
                continue
            items.extend((f"{at}: items[{i}]", item) for i, item in enumerate(listed))
        else:
            items.append((at, document))
    kept, skipped = _check(items, problems)
    if not problems and not any(item.get("kind") == "Node" for item in kept):
        problems.append(f"{where}: holds no Node; a snapshot needs the cluster's Nodes")
    if problems:
        raise SnapshotError(problems)
    return Snapshot(framework.StaticSource.from_objects(kept), skipped)


def _check(
    items: list[tuple[str, Mapping[str, Any]]], problems: list[str]
) -> tuple[list[Mapping[str, Any]], Counter[str]]:
    """Keep the objects a snapshot uses; each one must parse on its own."""
    kept: list[Mapping[str, Any]] = []
    skipped: Counter[str] = Counter()
    for at, item in items:
        if not isinstance(item, Mapping):
            problems.append(f"{at}: must be a Kubernetes object, not {_type(item)}")
            continue
        kind = item.get("kind")
        if not isinstance(kind, str) or not kind:
            problems.append(f"{at}: has no kind")
            continue
        if kind not in KINDS:
            skipped[kind] += 1
            continue
        meta = item.get("metadata")
        if not isinstance(meta, Mapping) or not meta.get("name"):
            problems.append(f"{at} ({kind}): has no metadata.name")
            continue
        name = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
        try:
            framework.StaticSource.from_objects([item])
        except (KeyError, ValueError, TypeError, AttributeError) as err:
            problems.append(f"{at} ({kind} {name}): cannot read it: {type(err).__name__}: {err}")
            continue
        kept.append(item)
    return kept, skipped


def _type(value: object) -> str:
    return "a list" if isinstance(value, list) else type(value).__name__
