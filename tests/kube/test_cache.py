"""The list-watch cache converges on the server's state through every kind of disturbance."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import pytest

from kube import cache, rest
from testbed import controlplane
from tests.waiting import eventually

pytestmark = pytest.mark.controlplane

CONFIGMAPS = cache.Resource("", "v1", "configmaps", True)


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"app": data.pop("app", "x")}}, "data": data}


def by_app(obj: Mapping[str, Any]) -> list[str]:
    return [obj["metadata"]["labels"]["app"]]


@pytest.fixture(params=[True, False], ids=["streamed", "paginated"])
def stream(request: pytest.FixtureRequest) -> bool:
    """Both ways an informer takes the initial state: a watch-list, or LIST pages."""
    return bool(request.param)


def test_sees_adds_updates_and_deletes(kube: rest.Rest, namespace: str, stream: bool) -> None:
    """Objects created before and after start, updated and deleted, are all reflected, with indexes."""
    path = CONFIGMAPS.path(namespace=namespace)
    kube.create(path, configmap("before", app="a"))
    informer = cache.Informer(
        kube, CONFIGMAPS, namespace=namespace, indexers={"app": by_app}, stream_list=stream
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


def test_initial_state_and_projection(
    kube: rest.Rest, namespace: str, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The initial state, streamed or paged through, brings every object and keeps
    only the projection; a v1.37 API server streams it when asked."""
    path = CONFIGMAPS.path(namespace=namespace)
    for i in range(25):
        kube.create(path, configmap(f"cm-{i:02d}", value=str(i)))
    caplog.set_level(logging.INFO, logger="kube.cache")
    informer = cache.Informer(
        kube,
        CONFIGMAPS,
        namespace=namespace,
        page_size=7,
        project=lambda obj: obj["data"]["value"],
        stream_list=stream,
    ).start()
    try:
        assert informer.wait_synced(10)
        assert sorted(informer.items(), key=int) == [str(i) for i in range(25)]
        assert informer.lists == 1 and informer.stream_list is stream
        assert "listed 25 in" in caplog.text
        assert ("(streamed)" if stream else "(paginated)") in caplog.text
    finally:
        informer.stop()


def test_a_server_that_will_not_stream_gets_paginated_lists(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With WatchList off (as on servers before 1.27) the watch-list is refused with 422:
    the informer says so once, lists by pages from then on, and keeps watching."""
    caplog.set_level(logging.INFO, logger="kube.cache")
    with controlplane.ControlPlane(apiserver_feature_gates={"WatchList": False}) as plane:
        kube = rest.Rest.from_kubeconfig(plane.kubeconfig, qps=0)
        path = CONFIGMAPS.path(namespace="default")
        kube.create(path, configmap("before"))
        informer = cache.Informer(kube, CONFIGMAPS, namespace="default").start()
        try:
            assert informer.wait_synced(10)
            assert informer.keys() == ["default/before"]
            assert informer.stream_list is False
            assert caplog.text.count("refuses streamed lists") == 1
            assert "listed 1 in" in caplog.text and "(paginated)" in caplog.text
            kube.create(path, configmap("after"))
            eventually(lambda: informer.get("default/after") is not None, what="a watched add")
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


def test_survives_api_server_restart(
    private_control_plane: controlplane.ControlPlane, stream: bool
) -> None:
    """With the API server down and back, the cache reconnects and catches up."""
    kube = rest.Rest.from_kubeconfig(private_control_plane.kubeconfig, qps=0)
    path = CONFIGMAPS.path(namespace="default")
    informer = cache.Informer(kube, CONFIGMAPS, namespace="default", stream_list=stream).start()
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


def test_relists_on_410_gone(
    private_control_plane: controlplane.ControlPlane, stream: bool
) -> None:
    """A watch from an expired resourceVersion gets 410 Gone; the cache relists and converges."""
    kube = rest.Rest.from_kubeconfig(private_control_plane.kubeconfig, qps=0)
    path = CONFIGMAPS.path(namespace="default")
    kube.create(path, configmap("old"))
    informer = cache.Informer(kube, CONFIGMAPS, namespace="default", stream_list=stream).start()
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


def test_malformed_object_costs_only_itself(kube: rest.Rest, namespace: str, stream: bool) -> None:
    """A malformed object is left out, counted and logged; the cache syncs and keeps watching."""
    path = CONFIGMAPS.path(namespace=namespace)
    kube.create(path, configmap("good", value="1"))
    kube.create(path, configmap("bad", value="banana"))
    informer = cache.Informer(
        kube, CONFIGMAPS, namespace=namespace, project=strict_value, stream_list=stream
    ).start()
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
