"""Pure pieces of the reconciler: the merge patch it sends, the ownerReferences it keeps."""

from __future__ import annotations

from typing import Any

import pytest

from manager import render, views


@pytest.mark.parametrize(
    ("old", "new", "patch"),
    [
        pytest.param({"a": 1}, {"a": 1}, {}, id="equal-no-patch"),
        pytest.param({"a": 1, "b": 2}, {"a": 1}, {"b": None}, id="removed-key-nulled"),
        pytest.param(
            {"a": {"x": 1, "y": 2}}, {"a": {"x": 3}}, {"a": {"x": 3, "y": None}}, id="nested"
        ),
        pytest.param({"l": [1, 2]}, {"l": [1]}, {"l": [1]}, id="lists-replace"),
        pytest.param({"a": {"x": 1}}, {"a": 5}, {"a": 5}, id="object-to-scalar"),
        pytest.param({}, {"a": {}}, {"a": {}}, id="new-empty-object"),
    ],
)
def test_merge_patch_turns_old_into_new(
    old: dict[str, Any], new: dict[str, Any], patch: dict[str, Any]
) -> None:
    """RFC 7386: applying the patch to `old` gives `new`, and an equal pair needs none."""
    assert views.merge_patch(old, new) == patch


def stored(*refs: dict[str, Any]) -> views.Stored:
    return views.Stored("n1", "7", {}, tuple(refs), {})


def test_owner_reference_kept_when_it_points_at_the_node() -> None:
    """Our reference with the Node's current uid: nothing to write."""
    node = views.NodeView("n1", "uid-1", {})
    assert views.owner_refs(stored(render.owner_reference("n1", "uid-1")), node) is None


def test_owner_reference_follows_a_recreated_node_and_keeps_others() -> None:
    """A Node re-created under the same name: the reference moves to the new uid."""
    other = {"apiVersion": "example.com/v1", "kind": "Policy", "name": "p", "uid": "u"}
    node = views.NodeView("n1", "uid-2", {})
    refs = views.owner_refs(stored(other, render.owner_reference("n1", "uid-1")), node)
    assert refs == [other, render.owner_reference("n1", "uid-2")]


def test_node_view_keeps_a_valid_bandwidth_annotation_only() -> None:
    """A quantity is kept as written; garbage is dropped (the strategy's value applies)."""
    good = {"metadata": {"name": "n", "annotations": {render.BANDWIDTH_ANNOTATION: "10G"}}}
    bad = {"metadata": {"name": "n", "annotations": {render.BANDWIDTH_ANNOTATION: "fast"}}}
    assert views.NodeView.from_api(good).bandwidth == "10G"
    assert views.NodeView.from_api(bad).bandwidth is None
