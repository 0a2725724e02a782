"""Koordinator's slo-controller rendering and merge tables, replayed against nodeqos-manager.

Sources (koordinator-sh/koordinator at a7a1b76bbf81abd26f9c377de1f31a60dd965f6e):

- `pkg/slo-controller/nodeslo/resource_strategy_test.go`: `Test_get*Spec` (which
  strategy a node takes from an already merged config) and `Test_calculate*Merged`
  (a ConfigMap key merged over the defaults, node strategies over the cluster's, a
  broken key keeping the old value);
- `pkg/slo-controller/nodemetric/collect_policy_test.go`: `Test_getNodeMetricCollectPolicy`.

The Go structs are written here as the JSON `json.Marshal` makes of them (a
`resource.Quantity` field is never omitted, so a SystemStrategy carries
`"totalNetworkBandwidth": "0"`); expected values are the wire form of the
strategy the node gets. A case that nodeqos answers differently names a row of
docs/deviations.md.
"""

from __future__ import annotations

import json
import pathlib
from datetime import timedelta
from typing import Any

import pytest

from kube import configstruct, nodeslo, selectors
from manager import render, sloconfig

SOURCE = "koordinator-sh/koordinator@a7a1b76b pkg/slo-controller/nodeslo/resource_strategy_test.go"
DEVIATIONS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "deviations.md"

THRESHOLD, QOS, BURST, SYSTEM = (
    sloconfig.THRESHOLD,
    sloconfig.RESOURCE_QOS,
    sloconfig.CPU_BURST,
    sloconfig.SYSTEM,
)
CLASSES: dict[str, Any] = {
    THRESHOLD: nodeslo.ResourceThresholdStrategy,
    QOS: nodeslo.ResourceQOSStrategy,
    BURST: nodeslo.CPUBurstStrategy,
    SYSTEM: nodeslo.SystemStrategy,
}
ATTRS = {THRESHOLD: "threshold", QOS: "resource_qos", BURST: "cpu_burst", SYSTEM: "system"}
DEFAULT_THRESHOLD = {
    "enable": False,
    "cpuSuppressThresholdPercent": 65,
    "cpuSuppressPolicy": "cpuset",
    "memoryEvictThresholdPercent": 70,
    "cpuEvictPolicy": "evictByRealLimit",
}
DEFAULT_BURST = {
    "policy": "none",
    "cpuBurstPercent": 1000,
    "cfsQuotaBurstPercent": 300,
    "cfsQuotaBurstPeriodSeconds": -1,
    "sharePoolThresholdPercent": 50,
}
DEFAULT_SYSTEM = {"totalNetworkBandwidth": "0"}
DEFAULTS = {THRESHOLD: DEFAULT_THRESHOLD, QOS: {}, BURST: DEFAULT_BURST, SYSTEM: DEFAULT_SYSTEM}
XXX = {"xxx": "yyy"}
ZZZ = {"zzz": "zzz"}


def be_identity(value: int) -> dict[str, Any]:
    return {"beClass": {"cpuQOS": {"groupIdentity": value}}}


def node(labels: dict[str, str], strategy: dict[str, Any]) -> dict[str, Any]:
    return {"nodeSelector": {"matchLabels": labels}, **strategy}


# ------------------------------------------------------------------ Test_get*Spec
# (key, cluster strategy or "default", [(matchLabels, strategy)], node labels, expected)

SELECT = [
    pytest.param(
        THRESHOLD,
        "default",
        [],
        {},
        DEFAULT_THRESHOLD,
        id="threshold/node empty ,use cluster config",
    ),
    pytest.param(
        THRESHOLD,
        {"enable": True, "cpuSuppressThresholdPercent": 60},
        [],
        {},
        {"enable": True, "cpuSuppressThresholdPercent": 60},
        id="threshold/get cluster config correctly",
    ),
    pytest.param(
        THRESHOLD,
        {"enable": True, "cpuSuppressThresholdPercent": 60},
        [(XXX, {"cpuSuppressThresholdPercent": 50})],
        XXX,
        {"cpuSuppressThresholdPercent": 50},
        id="threshold/get node config correctly",
    ),
    pytest.param(QOS, "default", [], {}, {}, id="qos/node empty, use cluster config"),
    pytest.param(
        QOS, be_identity(0), [], {}, be_identity(0), id="qos/get cluster config correctly"
    ),
    pytest.param(
        QOS,
        be_identity(0),
        [(XXX, be_identity(1)), (ZZZ, be_identity(2))],
        ZZZ,
        be_identity(2),
        id="qos/get node config correctly",
    ),
    pytest.param(
        QOS,
        be_identity(0),
        [(XXX, be_identity(1)), (ZZZ, be_identity(2))],
        XXX,
        be_identity(1),
        id="qos/get firstly-matched node config",
    ),
    pytest.param(
        BURST, "default", [], {}, DEFAULT_BURST, id="burst/default value for empty config"
    ),
    pytest.param(
        BURST,
        {"cfsQuotaBurstPeriodSeconds": 120},
        [],
        {},
        {"cfsQuotaBurstPeriodSeconds": 120},
        id="burst/get cluster config correctly",
    ),
    pytest.param(
        BURST,
        {"cpuBurstPercent": 200},
        [(XXX, {"cpuBurstPercent": 200}), (ZZZ, {"cpuBurstPercent": 100})],
        XXX,
        {"cpuBurstPercent": 200},
        id="burst/get node config correctly",
    ),
    pytest.param(
        SYSTEM, "default", [], {}, DEFAULT_SYSTEM, id="system/node invalid, use cluster config"
    ),
    pytest.param(
        SYSTEM,
        {"minFreeKbytesFactor": 150, "totalNetworkBandwidth": "10G"},
        [],
        {},
        {"minFreeKbytesFactor": 150, "totalNetworkBandwidth": "10G"},
        id="system/get cluster config correctly",
    ),
    pytest.param(
        SYSTEM,
        {"minFreeKbytesFactor": 150, "totalNetworkBandwidth": "100M"},
        [
            (XXX, {"minFreeKbytesFactor": 120, "totalNetworkBandwidth": "10M"}),
            (ZZZ, {"minFreeKbytesFactor": 130, "totalNetworkBandwidth": "1000M"}),
        ],
        ZZZ,
        {"minFreeKbytesFactor": 130, "totalNetworkBandwidth": "1000M"},
        id="system/get node config correctly",
    ),
    pytest.param(
        SYSTEM,
        {"minFreeKbytesFactor": 150, "totalNetworkBandwidth": "100M"},
        [
            (XXX, {"minFreeKbytesFactor": 120, "totalNetworkBandwidth": "10M"}),
            (ZZZ, {"minFreeKbytesFactor": 130, "totalNetworkBandwidth": "1000M"}),
        ],
        XXX,
        {"minFreeKbytesFactor": 120, "totalNetworkBandwidth": "10M"},
        id="system/get firstly-matched node config",
    ),
]


@pytest.mark.parametrize(
    ("doc", "labels", "expect"),
    [
        pytest.param(
            {"clusterStrategy": {"minFreeKbytesFactor": 150, "totalNetworkBandwidth": "10G"}},
            {},
            {"minFreeKbytesFactor": 150, "totalNetworkBandwidth": "99M"},
            id="use node-wise bandwidth config while use cluster strategy",
        ),
        pytest.param(
            {
                "clusterStrategy": {"minFreeKbytesFactor": 150, "totalNetworkBandwidth": "100M"},
                "nodeStrategies": [
                    node(XXX, {"minFreeKbytesFactor": 120, "totalNetworkBandwidth": "10M"}),
                    node(ZZZ, {"minFreeKbytesFactor": 130, "totalNetworkBandwidth": "1000M"}),
                ],
            },
            ZZZ,
            {"minFreeKbytesFactor": 130, "totalNetworkBandwidth": "99M"},
            id="use node-wise bandwidth config while use node strategy",
        ),
    ],
)
def test_node_bandwidth_annotation(
    doc: dict[str, Any], labels: dict[str, str], expect: dict[str, Any]
) -> None:
    """`Test_getSystemConfigSpec`: the Node's network-bandwidth annotation (99M) wins."""
    config = sloconfig.load({SYSTEM: json.dumps(doc)}).config
    annotations = {render.BANDWIDTH_ANNOTATION: "99M"}
    spec = render.nodeslo_spec(config, labels, render.node_bandwidth(annotations))
    assert spec["systemStrategy"] == expect


def decoded(key: str, raw: dict[str, Any]) -> Any:
    errors = configstruct.Errors()
    found = configstruct.decode_partial(CLASSES[key], raw, configstruct.FieldPath(key), errors)
    assert list(errors) == []
    return found


@pytest.mark.parametrize(("key", "cluster", "nodes", "labels", "expect"), SELECT)
def test_get_spec(
    key: str,
    cluster: dict[str, Any] | str,
    nodes: list[tuple[dict[str, str], dict[str, Any]]],
    labels: dict[str, str],
    expect: dict[str, Any],
) -> None:
    """A node takes the first matching node strategy of a merged config, else the cluster's."""
    base = DEFAULTS[key] if cluster == "default" else cluster
    assert isinstance(base, dict)
    strategies = sloconfig.Strategies(
        decoded(key, base),
        tuple(
            sloconfig.NodeStrategy(
                "", selectors.LabelSelector.from_api({"matchLabels": m}), decoded(key, s)
            )
            for m, s in nodes
        ),
    )
    assert configstruct.encode_object(strategies.for_labels(labels)) == expect


# ------------------------------------------------------------- Test_calculate*Merged
# (key, ConfigMap text or None (key absent), old config text, [(labels, expected)], error)

THRESHOLD_NODES = {
    "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60},
    "nodeStrategies": [
        node(XXX, {"cpuSuppressThresholdPercent": 40}),
        node(ZZZ, {"cpuSuppressThresholdPercent": 50}),
    ],
}
QOS_NODES = {
    "clusterStrategy": be_identity(0),
    "nodeStrategies": [node(XXX, be_identity(0)), node(ZZZ, be_identity(-1))],
}
BURST_CLUSTER = {"clusterStrategy": {"cfsQuotaBurstPeriodSeconds": 120}}
BURST_NODES = {
    **BURST_CLUSTER,
    "nodeStrategies": [node(XXX, {"cpuBurstPercent": 100}), node(ZZZ, {"cpuBurstPercent": 200})],
}
SYSTEM_NODES = {
    "clusterStrategy": {"watermarkScaleFactor": 151, "totalNetworkBandwidth": "0"},
    "nodeStrategies": [
        node(
            XXX,
            {"minFreeKbytesFactor": 130, "memcgReapBackGround": 1, "totalNetworkBandwidth": "0"},
        ),
        node(
            ZZZ,
            {"minFreeKbytesFactor": 140, "memcgReapBackGround": 0, "totalNetworkBandwidth": "0"},
        ),
    ],
}
OLD = {
    THRESHOLD: {"clusterStrategy": {"cpuSuppressThresholdPercent": 30}},
    QOS: {
        "clusterStrategy": {
            "beClass": {"cpuQOS": {"groupIdentity": 2}, "memoryQOS": {"minLimitPercent": 40}}
        }
    },
    # Koordinator's table keeps an old value of 30, below the field's own minimum
    # (`validate:"min=100"`, the CRD's minimum: 100) that nodeqos enforces: 130 stands in.
    BURST: {"clusterStrategy": {"cfsQuotaBurstPercent": 130}},
    SYSTEM: {"clusterStrategy": {"watermarkScaleFactor": 99}},
}

MERGED = [
    pytest.param(
        THRESHOLD,
        None,
        [({}, DEFAULT_THRESHOLD)],
        False,
        id="threshold/config contents is empty,then use default",
    ),
    pytest.param(
        THRESHOLD,
        "invalid_content",
        [({}, {**DEFAULT_THRESHOLD, "cpuSuppressThresholdPercent": 30})],
        True,
        id="threshold/throw error for configmap unmarshal failed",
    ),
    pytest.param(
        THRESHOLD,
        {"clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60}},
        [({}, {**DEFAULT_THRESHOLD, "enable": True, "cpuSuppressThresholdPercent": 60})],
        False,
        id="threshold/only cluster config",
    ),
    pytest.param(
        THRESHOLD,
        THRESHOLD_NODES,
        [
            ({}, {**DEFAULT_THRESHOLD, "enable": True, "cpuSuppressThresholdPercent": 60}),
            (XXX, {**DEFAULT_THRESHOLD, "enable": True, "cpuSuppressThresholdPercent": 40}),
            (ZZZ, {**DEFAULT_THRESHOLD, "enable": True, "cpuSuppressThresholdPercent": 50}),
        ],
        False,
        id="threshold/node config",
    ),
    pytest.param(QOS, None, [({}, {})], False, id="qos/config is null! use old"),
    pytest.param(
        QOS,
        "invalid_content",
        [({}, OLD[QOS]["clusterStrategy"])],
        True,
        id="qos/throw error for configmap unmarshal failed",
    ),
    pytest.param(
        QOS,
        {"clusterStrategy": be_identity(0)},
        [({}, be_identity(0))],
        False,
        id="qos/get cluster config correctly",
    ),
    pytest.param(
        QOS,
        QOS_NODES,
        [({}, be_identity(0)), (XXX, be_identity(0)), (ZZZ, be_identity(-1))],
        False,
        id="qos/get node config correctly",
    ),
    pytest.param(
        BURST, None, [({}, DEFAULT_BURST)], False, id="burst/config is null! use cluster config"
    ),
    pytest.param(
        BURST,
        "invalid_content",
        [({}, {**DEFAULT_BURST, "cfsQuotaBurstPercent": 130})],
        True,
        id="burst/throw error for configmap unmarshal failed",
    ),
    pytest.param(
        BURST,
        BURST_CLUSTER,
        [({}, {**DEFAULT_BURST, "cfsQuotaBurstPeriodSeconds": 120})],
        False,
        id="burst/get cluster config correctly",
    ),
    pytest.param(
        BURST,
        BURST_NODES,
        [
            (XXX, {**DEFAULT_BURST, "cfsQuotaBurstPeriodSeconds": 120, "cpuBurstPercent": 100}),
            (ZZZ, {**DEFAULT_BURST, "cfsQuotaBurstPeriodSeconds": 120, "cpuBurstPercent": 200}),
        ],
        False,
        id="burst/get config merged correctly",
    ),
    pytest.param(
        SYSTEM, None, [({}, DEFAULT_SYSTEM)], False, id="system/config is null! use oldConfig"
    ),
    pytest.param(
        SYSTEM,
        "invalid_content",
        [({}, {"watermarkScaleFactor": 99, "totalNetworkBandwidth": "0"})],
        True,
        id="system/throw error for configmap unmarshal failed",
    ),
    pytest.param(
        SYSTEM,
        {
            "clusterStrategy": {
                "watermarkScaleFactor": 151,
                "memcgReapBackGround": 1,
                "totalNetworkBandwidth": "0",
            }
        },
        [
            (
                {},
                {
                    "watermarkScaleFactor": 151,
                    "memcgReapBackGround": 1,
                    "totalNetworkBandwidth": "0",
                },
            )
        ],
        False,
        id="system/cluster config only",
    ),
    pytest.param(
        SYSTEM,
        SYSTEM_NODES,
        [
            ({}, {"watermarkScaleFactor": 151, "totalNetworkBandwidth": "0"}),
            (
                XXX,
                {
                    "minFreeKbytesFactor": 130,
                    "watermarkScaleFactor": 151,
                    "memcgReapBackGround": 1,
                    "totalNetworkBandwidth": "0",
                },
            ),
            (
                ZZZ,
                {
                    "minFreeKbytesFactor": 140,
                    "watermarkScaleFactor": 151,
                    "memcgReapBackGround": 0,
                    "totalNetworkBandwidth": "0",
                },
            ),
        ],
        False,
        id="system/node config merged",
    ),
]


@pytest.mark.parametrize(("key", "text", "expect", "error"), MERGED)
def test_calculate_merged(
    key: str,
    text: dict[str, Any] | str | None,
    expect: list[tuple[dict[str, str], dict[str, Any]]],
    error: bool,
) -> None:
    """A key merged over the defaults, node strategies over the cluster's; a broken key
    keeps the old value and is reported."""
    old = sloconfig.load({key: json.dumps(OLD[key])}).config
    data = {} if text is None else {key: text if isinstance(text, str) else json.dumps(text)}
    loaded = sloconfig.load(data, old)
    assert bool(loaded.problems) is error
    strategies = getattr(loaded.config, ATTRS[key])
    for labels, want in expect:
        assert configstruct.encode_object(strategies.for_labels(labels)) == want, labels


# ------------------------------------------------------- host-application-config

APPS_A = [{"name": "test-app-ls", "qos": "LS"}]
APPS_B = [{"name": "test-app-lsr", "qos": "LSR"}]
DEFAULT_APPS = [{"name": "test-app-default"}]
HOST_APPS = {
    "applications": DEFAULT_APPS,
    "nodeConfigs": [
        node({"test-node-key-A": "test-node-value-A"}, {"applications": APPS_A}),
        node({"test-node-key-B": "test-node-value-B"}, {"applications": APPS_B}),
    ],
}
BOTH = {"test-node-key-A": "test-node-value-A", "test-node-key-B": "test-node-value-B"}


@pytest.mark.parametrize(
    ("data", "labels", "expect", "error"),
    [
        pytest.param(HOST_APPS, {}, DEFAULT_APPS, False, id="invalid node, use cluster config"),
        pytest.param(HOST_APPS, BOTH, APPS_A, False, id="use first matched node config"),
        pytest.param(None, {}, [], False, id="configmap key not exist, use empty"),
        pytest.param(
            "bad-string",
            {},
            [{"name": "origin-host-app", "qos": "LS"}],
            True,
            id="bad configmap key, use old",
        ),
        pytest.param(
            {"applications": [{"name": "new-host-app", "qos": "LS"}]},
            {},
            [{"name": "new-host-app", "qos": "LS"}],
            False,
            id="parse from new host application",
        ),
    ],
)
def test_host_applications(
    data: dict[str, Any] | str | None, labels: dict[str, str], expect: list[Any], error: bool
) -> None:
    """`Test_getHostApplicationConfig` and `Test_calculateHostAppConfigMerged`."""
    key = sloconfig.HOST_APPLICATION
    old = sloconfig.load(
        {key: json.dumps({"applications": [{"name": "origin-host-app", "qos": "LS"}]})}
    )
    raw = {} if data is None else {key: data if isinstance(data, str) else json.dumps(data)}
    loaded = sloconfig.load(raw, old.config)
    assert bool(loaded.problems) is error
    assert loaded.config.host_applications is not None
    assert list(loaded.config.host_applications.for_labels(labels)) == expect


# --------------------------------------------- Test_getNodeMetricCollectPolicy


@pytest.mark.parametrize(
    ("strategy", "expect"),
    [
        pytest.param(None, "defaults", id="empty config"),
        pytest.param(sloconfig.CollectStrategy(enable=False), "defaults", id="config disabled"),
        pytest.param(
            sloconfig.CollectStrategy(
                enable=True,
                aggregate_duration_seconds=60,
                report_interval_seconds=180,
                memory_collect_policy="usageWithoutPageCache",
            ),
            {
                "aggregateDurationSeconds": 60,
                "reportIntervalSeconds": 180,
                "nodeMemoryCollectPolicy": "usageWithoutPageCache",
            },
            id="config enabled",
        ),
    ],
)
def test_collect_policy(
    strategy: sloconfig.CollectStrategy | None, expect: dict[str, Any] | str
) -> None:
    """Koordinator errors on a missing or disabled strategy and keeps the default spec: the
    manager renders the defaults then; an enabled one gives its metric* fields."""
    found = (strategy or sloconfig.CollectStrategy()).collect_policy().to_api()
    if expect == "defaults":
        assert found == {
            "aggregateDurationSeconds": 300,
            "reportIntervalSeconds": 60,
            "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
            "nodeMemoryCollectPolicy": "usageWithoutPageCache",
        }
        assert sloconfig.DEFAULT_COLLECT.aggregate_durations == (
            timedelta(minutes=5),
            timedelta(minutes=10),
            timedelta(minutes=30),
        )
    else:
        assert found == expect


def deviation_row(key: str) -> str:
    for line in DEVIATIONS.read_text(encoding="utf-8").splitlines():
        if line.startswith(f"| `{key}` |"):
            return line
    raise AssertionError(f"docs/deviations.md has no row `{key}`")


# Where the manager answers differently from Koordinator on purpose (no table row
# exercises them; tests/manager/test_sloconfig.py does).
MANAGER_DEVIATIONS = (
    "manager-strict-keys",
    "manager-invalid-selector",
    "manager-broken-at-start",
    "manager-bandwidth-annotation",
    "manager-unmanaged-extensions",
    "manager-owned-deletes",
)


def test_every_manager_deviation_is_documented() -> None:
    """Each deviation the manager makes is a row of docs/deviations.md."""
    for key in MANAGER_DEVIATIONS:
        assert "nodeqos-manager" in deviation_row(key)
