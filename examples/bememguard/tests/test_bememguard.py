"""BEMemoryGuard as the stock extender loads it: found through its entry point, built, filtering."""

from __future__ import annotations

from typing import Any

import nodeqos_bememguard
import pytest
from prometheus_client import CollectorRegistry

from extender import framework, plugins
from extender.framework import config

NOW = 1_700_000_000.0
GIB = 1 << 30


def node(name: str, memory_gib: int = 32) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": name},
        "status": {"allocatable": {"cpu": "8", "memory": f"{memory_gib}Gi", "pods": "110"}},
    }


def metric(name: str, used_gib: int, age: float = 10) -> dict[str, Any]:
    from datetime import UTC, datetime

    updated = datetime.fromtimestamp(NOW - age, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": name},
        "status": {
            "updateTime": updated,
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1", "memory": f"{used_gib}Gi"}}},
        },
    }


def pod(name: str, qos: str | None, requests: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {"koordinator.sh/qosClass": qos} if qos else {}
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    if requests:
        container["resources"] = {"requests": requests}
    return {
        "metadata": {"name": name, "namespace": "default", "uid": name, "labels": labels},
        "spec": {"containers": [container]},
    }


def profile(threshold: int = 70) -> dict[str, Any]:
    return {
        "apiVersion": config.API_VERSION,
        "kind": config.KIND,
        "profiles": [
            {
                "plugins": {"filter": {"enabled": [{"name": "BEMemoryGuard", "required": True}]}},
                "pluginConfig": [
                    {"name": "BEMemoryGuard", "args": {"memoryThresholdPercent": threshold}}
                ],
            }
        ],
    }


def built() -> framework.Framework:
    """The framework the extender would build, its watches fed by hand."""
    registry = plugins.registry()
    watches: list[tuple[Any, Any, Any]] = []
    handle = framework.Handle(
        lambda resource, project, on_event, selector: watches.append((resource, project, on_event)),
        clock=lambda: NOW,
        registry=CollectorRegistry(),
    )
    fw = framework.build(config.decode_config(profile(), registry), registry, handle)
    feed = {
        "nodes": [node("hot"), node("calm"), node("stale")],
        "nodemetrics": [metric("hot", 28), metric("calm", 8), metric("stale", 30, age=600)],
    }
    for resource, project, on_event in watches:
        for raw in feed[resource.plural]:
            on_event("ADDED", None, project(raw))
    return fw


def test_the_entry_point_registers_the_plugin() -> None:
    """The installed distribution's entry point is what the extender's registry finds."""
    entry = plugins.registry().get("BEMemoryGuard")
    assert entry is not None and entry.error is None
    assert entry.factory is nodeqos_bememguard.factory


@pytest.mark.parametrize(
    ("incoming", "refused"),
    [
        pytest.param(pod("batch", "BE"), {"hot"}, id="koordinator-be"),
        pytest.param(pod("idle", None), {"hot"}, id="kubernetes-besteffort"),
        pytest.param(pod("web", "LS", {"cpu": "1"}), set(), id="ls"),
        pytest.param(pod("web2", None, {"cpu": "1"}), set(), id="burstable"),
    ],
)
def test_only_be_pods_are_kept_off_the_memory_hot_node(
    incoming: dict[str, Any], refused: set[str]
) -> None:
    """87% used > 70%: refused for BE; 25% passes; a 10-minute-old NodeMetric says nothing."""
    passed, failed = built().filter(incoming, ["hot", "calm", "stale"])
    assert set(failed) == refused
    assert passed == [n for n in ("hot", "calm", "stale") if n not in refused]
    if refused:
        assert failed["hot"] == (
            "node hot: memory usage 87 percent > 70 percent, no room for a BE pod (BEMemoryGuard)"
        )


def test_bad_args_are_reported_with_their_path() -> None:
    """A threshold out of range names profiles[0].pluginConfig[0].args.memoryThresholdPercent."""
    with pytest.raises(framework.ArgsError) as caught:
        config.decode_config(profile(threshold=150), plugins.registry())
    assert caught.value.problems == [
        "profiles[0].pluginConfig[0].args.memoryThresholdPercent: must be within [1, 100] (got 150)"
    ]
