"""kube.informerset on the real API server: one watch per resource, a projection per consumer."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from kube import cache, informerset, rest
from testbed import localcluster
from tests.waiting import eventually

pytestmark = pytest.mark.controlplane


def test_two_consumers_share_one_watch_each_with_its_own_projection(kube: rest.Rest) -> None:
    """Two views of the Node informer: one LIST/watch, each view reads its own projection,
    each handler hears every event; an index works per view; a late view is refused."""
    tag = uuid.uuid4().hex[:8]
    selector = f"nodeqos-test={tag}"
    informers = informerset.Informers(kube)
    heard: dict[str, list[str]] = {"names": [], "labels": []}
    lock = threading.Lock()

    def hear(who: str) -> cache.Handler[Any]:
        def handler(kind: str, _old: object, _new: object) -> None:
            with lock:
                heard[who].append(kind)

        return handler

    def name_of(obj: Mapping[str, Any]) -> str:
        return str(obj["metadata"]["name"])

    def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
        return dict(obj["metadata"].get("labels") or {})

    names = informers.watch(cache.NODES, label_selector=selector).view(
        name_of, on_event=hear("names")
    )
    labels = informers.watch(cache.NODES, label_selector=selector).view(
        labels_of,
        indexers={"pool": lambda found: [found.get("pool", "")]},
        on_event=hear("labels"),
    )
    assert names.shared is labels.shared and len(informers.all()) == 1
    node = f"is-{tag}"
    localcluster.register_node(kube, node, labels={"nodeqos-test": tag, "pool": "a"})
    informers.start()
    try:
        eventually(lambda: names.get(node) == node, "the node in the names view")
        found = labels.get(node)
        assert found is not None and found["pool"] == "a" and found["nodeqos-test"] == tag
        assert labels.by_index("pool", "a") == [found]
        assert names.items() == [node] and names.keys() == [node] and len(labels) == 1
        kube.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {"pool": "b"}}})
        eventually(lambda: labels.by_index("pool", "b"), "the relabelled node indexed")
        assert labels.by_index("pool", "a") == []
        eventually(lambda: len(heard["names"]) >= 2, "both events heard")
        assert heard["names"][:2] == heard["labels"][:2] == ["ADDED", "MODIFIED"]
        assert labels.shared.informer.lists == 1  # one LIST served both views
        with pytest.raises(RuntimeError, match="before it is used"):
            informers.watch(cache.NODES, label_selector=selector).view(name_of)
    finally:
        informers.stop()
        with contextlib.suppress(rest.ApiError):
            kube.delete(f"/api/v1/nodes/{node}")
