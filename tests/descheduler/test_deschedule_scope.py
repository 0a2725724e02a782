"""The Deschedule plugins' candidate walk: an included namespace list reads only those pods."""

from __future__ import annotations

import pytest

from descheduler import framework
from descheduler.config import common
from descheduler.framework import Snapshot
from descheduler.plugins import _deschedule
from kube import objects, selectors
from tests import builders
from tests.descheduler import fakes


def cluster() -> Snapshot:
    pods = [
        builders.make_pod(
            f"{name}-{i}",
            namespace=namespace,
            node=node,
            labels={"app": name},
            phase="Succeeded" if i == 2 else "Running",
        )
        for node in ("n2", "n1", "n3")
        for namespace in ("c", "a", "b", "a-z")
        for name in ("web", "db")
        for i in range(3)
    ]
    source = framework.StaticSource(nodes=fakes.nodes("n1", "n2", "n3"), pods=pods)
    return Snapshot(source.state(), taken_at=fakes.NOW)


def names(placed: list[tuple[objects.Pod, objects.Node]]) -> list[tuple[str, str]]:
    return [(pod.key, node.name) for pod, node in placed]


@pytest.mark.parametrize("terminal", [True, False])
@pytest.mark.parametrize("selector", [None, {"matchLabels": {"app": "db"}}])
@pytest.mark.parametrize(
    "namespaces",
    [
        pytest.param(None, id="all"),
        pytest.param(common.IncludeExclude(include=("c", "a", "c")), id="include"),
        pytest.param(common.IncludeExclude(include=("zz",)), id="include-missing"),
        pytest.param(common.IncludeExclude(exclude=("a",)), id="exclude"),
    ],
)
def test_scope_walk_is_the_filtered_walk(
    namespaces: common.IncludeExclude | None, selector: dict[str, object] | None, terminal: bool
) -> None:
    """Same pods, same order, as reading every pod on every node and filtering."""
    snap = cluster()
    args = common.PodScopeArgs(
        namespaces=namespaces,
        label_selector=None if selector is None else selectors.LabelSelector.from_api(selector),
    )
    expected = [
        placed
        for placed in _deschedule.placed_pods(snap, including_terminal=terminal)
        if args.in_scope(placed[0])
    ]
    found = list(_deschedule.pods_in_scope(snap, args, including_terminal=terminal))
    assert names(found) == names(expected)
    if namespaces is not None and namespaces.include == ("c", "a", "c"):
        assert [pod.namespace for pod, _ in found[:2]] == ["a", "a"]  # name order on each node
        per_namespace_and_node = (6 if terminal else 4) // (2 if selector else 1)
        assert len(found) == per_namespace_and_node * 2 * 3
