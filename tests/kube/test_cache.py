"""The list-watch cache converges on the server's state through every kind of disturbance."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from kube import cache, controlplane, rest

pytestmark = pytest.mark.controlplane

CONFIGMAPS = cache.Resource("", "v1", "configmaps", True)


def eventually(check: Callable[[], bool], timeout: float = 15.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"app": data.pop("app", "x")}}, "data": data}


def by_app(obj: Mapping[str, Any]) -> list[str]:
    return [obj["metadata"]["labels"]["app"]]


def test_sees_adds_updates_and_deletes(kube: rest.Rest, namespace: str) -> None:
    """Objects created before and after start, updated and deleted, are all reflected, with indexes."""
    path = CONFIGMAPS.path(namespace=namespace)
    kube.create(path, configmap("before", app="a"))
    informer = cache.Informer(
        kube, CONFIGMAPS, namespace=namespace, indexers={"app": by_app}
    ).start()
    try:
        assert informer.wait_synced(10)
        assert informer.keys() == [f"{namespace}/before"]
        kube.create(path, configmap("after", app="b"))
        eventually(lambda: informer.get(f"{namespace}/after") is not None, what="add")
        kube.patch(
            CONFIGMAPS.path("after", namespace=namespace), {"metadata": {"labels": {"app": "a"}}}
        )
        eventually(lambda: len(informer.by_index("app", "a")) == 2, what="update reindexed")
        assert informer.by_index("app", "b") == []
        kube.delete(CONFIGMAPS.path("before", namespace=namespace))
        eventually(lambda: informer.get(f"{namespace}/before") is None, what="delete")
        assert [o["metadata"]["name"] for o in informer.by_index("app", "a")] == ["after"]
    finally:
        informer.stop()


def test_paginated_list_and_projection(kube: rest.Rest, namespace: str) -> None:
    """The initial list pages through every object and keeps only the projection."""
    path = CONFIGMAPS.path(namespace=namespace)
    for i in range(25):
        kube.create(path, configmap(f"cm-{i:02d}", value=str(i)))
    informer = cache.Informer(
        kube, CONFIGMAPS, namespace=namespace, page_size=7, project=lambda obj: obj["data"]["value"]
    ).start()
    try:
        assert informer.wait_synced(10)
        assert sorted(informer.items(), key=int) == [str(i) for i in range(25)]
    finally:
        informer.stop()


def test_stop_is_prompt(kube: rest.Rest, namespace: str) -> None:
    """stop() ends a watch blocked on a quiet stream within a second."""
    informer = cache.Informer(kube, CONFIGMAPS, namespace=namespace).start()
    assert informer.wait_synced(10)
    time.sleep(0.3)
    started = time.monotonic()
    informer.stop()
    assert time.monotonic() - started < 1.0


def test_survives_api_server_restart(private_control_plane: controlplane.ControlPlane) -> None:
    """With the API server down and back, the cache reconnects and catches up."""
    kube = rest.Rest.from_kubeconfig(private_control_plane.kubeconfig, qps=0)
    path = CONFIGMAPS.path(namespace="default")
    informer = cache.Informer(kube, CONFIGMAPS, namespace="default").start()
    try:
        assert informer.wait_synced(10)
        private_control_plane.stop_apiserver()
        time.sleep(1.0)
        private_control_plane.start_apiserver()
        kube.create(path, configmap("after-restart"))
        eventually(
            lambda: informer.get("default/after-restart") is not None,
            timeout=45,
            what="an object created after the restart",
        )
    finally:
        informer.stop()


def test_relists_on_410_gone(private_control_plane: controlplane.ControlPlane) -> None:
    """A watch from an expired resourceVersion gets 410 Gone; the cache relists and converges."""
    kube = rest.Rest.from_kubeconfig(private_control_plane.kubeconfig, qps=0)
    path = CONFIGMAPS.path(namespace="default")
    kube.create(path, configmap("old"))
    informer = cache.Informer(kube, CONFIGMAPS, namespace="default").start()
    try:
        assert informer.wait_synced(10)
        informer.stop()
        kube.delete(CONFIGMAPS.path("old", namespace="default"))
        for i in range(3):
            kube.create(path, configmap(f"new-{i}"))
        # Compact etcd past the cache's resourceVersion and restart the API server so
        # its watch cache starts after it: resuming from the old version must get 410.
        private_control_plane.compact_etcd()
        private_control_plane.stop_apiserver()
        private_control_plane.start_apiserver()
        informer.start()
        eventually(lambda: informer.lists == 2, timeout=30, what="a relist")
        eventually(
            lambda: sorted(informer.keys()) == [f"default/new-{i}" for i in range(3)],
            what="convergence after relist",
        )
    finally:
        informer.stop()


def strict_value(obj: Mapping[str, Any]) -> int:
    """A projection that refuses garbage, as NodeMetric.from_api refuses a bad quantity."""
    return int(obj["data"]["value"])


def test_malformed_object_costs_only_itself(kube: rest.Rest, namespace: str) -> None:
    """A malformed object is left out, counted and logged; the cache syncs and keeps watching."""
    path = CONFIGMAPS.path(namespace=namespace)
    kube.create(path, configmap("good", value="1"))
    kube.create(path, configmap("bad", value="banana"))
    informer = cache.Informer(kube, CONFIGMAPS, namespace=namespace, project=strict_value).start()
    try:
        assert informer.wait_synced(10)
        assert informer.keys() == [f"{namespace}/good"]
        assert informer.projection_errors == 1
        good = CONFIGMAPS.path("good", namespace=namespace)
        kube.patch(good, {"data": {"value": "garbage"}})
        eventually(lambda: informer.get(f"{namespace}/good") is None, what="the stale copy dropped")
        kube.patch(good, {"data": {"value": "2"}})
        eventually(lambda: informer.get(f"{namespace}/good") == 2, what="recovery")
        kube.patch(CONFIGMAPS.path("bad", namespace=namespace), {"data": {"value": "3"}})
        eventually(lambda: informer.get(f"{namespace}/bad") == 3, what="the fixed object")
        assert informer.projection_errors == 2
    finally:
        informer.stop()
