"""Reading slo-controller-config: defaults, merge order, node strategy choice, errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kube import nodeslo
from manager import render, sloconfig
from tests.builders import make_slo_config_data, node_strategy, strategy_doc

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "manager"
POOL_A = {"pool": "a"}
POOL_B = {"pool": "b"}


def thresholds(loaded: sloconfig.Loaded, labels: dict[str, str]) -> dict[str, Any]:
    return render.nodeslo_spec(loaded.config, labels)["resourceUsedThresholdWithBE"]


def two_pools(**cluster: Any) -> sloconfig.Loaded:
    doc = strategy_doc(
        cluster,
        node_strategy("a", POOL_A, cpuSuppressThresholdPercent=50),
        node_strategy("b", POOL_B, cpuSuppressThresholdPercent=40, enable=False),
    )
    return sloconfig.load(make_slo_config_data(resource_threshold_config=doc))


def test_missing_configmap_renders_koordinator_defaults() -> None:
    """No ConfigMap: Koordinator's DefaultSLOCfg for every key (resourceQOS empty)."""
    spec = render.nodeslo_spec(sloconfig.load(None).config, {})
    assert spec == {
        "resourceUsedThresholdWithBE": {
            "enable": False,
            "cpuSuppressThresholdPercent": 65,
            "cpuSuppressPolicy": "cpuset",
            "memoryEvictThresholdPercent": 70,
            "cpuEvictPolicy": "evictByRealLimit",
        },
        "resourceQOSStrategy": {},
        "cpuBurstStrategy": {
            "policy": "none",
            "cpuBurstPercent": 1000,
            "cfsQuotaBurstPercent": 300,
            "cfsQuotaBurstPeriodSeconds": -1,
            "sharePoolThresholdPercent": 50,
        },
        "systemStrategy": {"totalNetworkBandwidth": "0"},
    }


def test_cluster_strategy_merges_over_the_defaults() -> None:
    """Setting only `enable` keeps every other default of the key."""
    loaded = two_pools(enable=True)
    assert thresholds(loaded, {}) == {
        "enable": True,
        "cpuSuppressThresholdPercent": 65,
        "cpuSuppressPolicy": "cpuset",
        "memoryEvictThresholdPercent": 70,
        "cpuEvictPolicy": "evictByRealLimit",
    }


def test_node_strategy_merges_over_the_merged_cluster_strategy() -> None:
    """A node strategy inherits the cluster's fields and overrides its own."""
    loaded = two_pools(enable=True, memoryEvictThresholdPercent=80)
    a = thresholds(loaded, POOL_A)
    assert (a["enable"], a["cpuSuppressThresholdPercent"], a["memoryEvictThresholdPercent"]) == (
        True,
        50,
        80,
    )
    b = thresholds(loaded, POOL_B)
    assert (b["enable"], b["cpuSuppressThresholdPercent"]) == (False, 40)


def test_first_matching_node_strategy_wins() -> None:
    """Two strategies select the node: the first listed applies."""
    doc = strategy_doc(
        {},
        node_strategy("first", POOL_A, cpuSuppressThresholdPercent=51),
        node_strategy("second", POOL_A, cpuSuppressThresholdPercent=52),
    )
    loaded = sloconfig.load(make_slo_config_data(resource_threshold_config=doc))
    assert thresholds(loaded, POOL_A)["cpuSuppressThresholdPercent"] == 51


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        pytest.param(None, False, id="missing-selector-matches-nothing"),
        pytest.param({}, True, id="empty-selector-matches-every-node"),
        pytest.param(
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a", "c"]}]},
            True,
            id="expression",
        ),
    ],
)
def test_node_selector_semantics(selector: dict[str, Any] | None, matches: bool) -> None:
    """nil selects no node, {} selects every node (metav1.LabelSelectorAsSelector)."""
    entry: dict[str, Any] = {"name": "x", "cpuSuppressThresholdPercent": 11}
    if selector is not None:
        entry["nodeSelector"] = selector
    doc = strategy_doc({}, entry)
    loaded = sloconfig.load(make_slo_config_data(resource_threshold_config=doc))
    assert loaded.problems == ()
    assert (thresholds(loaded, POOL_A)["cpuSuppressThresholdPercent"] == 11) is matches


def test_a_missing_key_means_that_keys_defaults() -> None:
    """Only cpu-burst-config set: thresholds are the defaults, burst is the document's."""
    data = make_slo_config_data(cpu_burst_config=strategy_doc({"policy": "auto"}))
    spec = render.nodeslo_spec(sloconfig.load(data).config, {})
    assert spec["cpuBurstStrategy"]["policy"] == "auto"
    assert spec["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 65


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("{not json", "resource-threshold-config: invalid JSON", id="bad-json"),
        pytest.param("[1]", "resource-threshold-config: must be a JSON object", id="not-object"),
        pytest.param(
            '{"clusterStrategy": {"cpuSuppressThresholdPercent": "high"}}',
            "resource-threshold-config.clusterStrategy.cpuSuppressThresholdPercent: must be an"
            " integer",
            id="wrong-type",
        ),
        pytest.param(
            '{"clusterStrategy": {"cpuSuppressPolicy": "magic"}}',
            "resource-threshold-config.clusterStrategy.cpuSuppressPolicy: must be one of",
            id="unknown-policy",
        ),
        pytest.param(
            '{"nodeStrategies": [{"nodeSelector": {"matchExpressions": [{"key": "k",'
            ' "operator": "Near"}]}}]}',
            "resource-threshold-config.nodeStrategies[0].nodeSelector.matchExpressions[0]"
            ".operator: unknown operator",
            id="bad-selector",
        ),
        pytest.param(
            '{"nodeStrategies": {"a": 1}}',
            "resource-threshold-config.nodeStrategies: must be a list",
            id="strategies-not-a-list",
        ),
    ],
)
def test_a_broken_key_keeps_its_last_good_value(text: str, message: str) -> None:
    """The broken key is reported with its field path and keeps its previous value."""
    good = two_pools(enable=True)
    data = make_slo_config_data(
        resource_threshold_config=text, cpu_burst_config=strategy_doc({"policy": "auto"})
    )
    loaded = sloconfig.load(data, good.config)
    assert [p.key for p in loaded.problems] == ["resource-threshold-config"]
    assert loaded.problems[0].message.startswith(message), loaded.problems[0].message
    assert loaded.config.threshold == good.config.threshold
    assert render.nodeslo_spec(loaded.config, {})["cpuBurstStrategy"]["policy"] == "auto"


def test_a_key_broken_since_start_blocks_nodeslo_rendering() -> None:
    """No last good value: the config says NodeSLOs must not be rendered (never blanked)."""
    loaded = sloconfig.load(make_slo_config_data(system_config="{"))
    assert not loaded.config.nodeslo_ready
    with pytest.raises(ValueError, match="good value"):
        render.nodeslo_spec(loaded.config, {})


def test_unknown_fields_are_warnings_and_ignored() -> None:
    """A field Koordinator does not know is ignored (as Go does) but reported."""
    doc = strategy_doc({"enable": True, "cpuSupressThresholdPercent": 10})
    loaded = sloconfig.load(make_slo_config_data(resource_threshold_config=doc))
    assert loaded.problems == ()
    assert [w.message for w in loaded.warnings] == [
        "resource-threshold-config.clusterStrategy.cpuSupressThresholdPercent: unknown field"
        ' (did you mean "cpuSuppressThresholdPercent"?)'
    ]
    assert thresholds(loaded, {})["enable"] is True


def test_collect_policy_defaults_while_colocation_is_disabled() -> None:
    """Koordinator's nodemetric controller: a disabled colocation-config means the defaults."""
    data = make_slo_config_data(colocation_config={"metricReportIntervalSeconds": 20})
    spec = render.nodemetric_spec(sloconfig.load(data).config, {})
    assert spec["metricCollectPolicy"]["reportIntervalSeconds"] == 60


def test_collect_policy_from_an_enabled_colocation_config_and_node_config() -> None:
    """Enabled: the strategy's metric* fields, a matching nodeConfigs entry merged over them."""
    doc = {
        "enable": True,
        "metricReportIntervalSeconds": 20,
        "metricAggregatePolicy": {"durations": ["5m", "1h"]},
        "nodeConfigs": [node_strategy("a", POOL_A, metricAggregateDurationSeconds=120)],
    }
    config = sloconfig.load(make_slo_config_data(colocation_config=doc)).config
    assert render.nodemetric_spec(config, POOL_A) == {
        "metricCollectPolicy": {
            "aggregateDurationSeconds": 120,
            "reportIntervalSeconds": 20,
            "nodeAggregatePolicy": {"durations": ["5m0s", "1h0m0s"]},
            "nodeMemoryCollectPolicy": "usageWithoutPageCache",
        }
    }
    other = render.nodemetric_spec(config, POOL_B)["metricCollectPolicy"]
    assert other["aggregateDurationSeconds"] == 300


def test_a_bad_colocation_duration_is_reported() -> None:
    """An unparsable aggregate window names its index."""
    doc = {"enable": True, "metricAggregatePolicy": {"durations": ["5 minutes"]}}
    loaded = sloconfig.load(make_slo_config_data(colocation_config=doc))
    assert [p.message.split(":")[0] for p in loaded.problems] == [
        "colocation-config.metricAggregatePolicy.durations[0]"
    ]


def test_rendered_spec_is_what_the_agent_parses() -> None:
    """The agent's merge (kube.nodeslo.merge_over_defaults) takes the rendered spec cleanly."""
    qos = strategy_doc({"beClass": {"cpuQOS": {"enable": True}, "memoryQOS": {"wmarkRatio": 90}}})
    burst = strategy_doc({"policy": "cfsQuotaBurstOnly"})
    system = strategy_doc({"minFreeKbytesFactor": 100})
    threshold = strategy_doc(
        {"enable": True}, node_strategy("a", POOL_A, cpuSuppressThresholdPercent=50)
    )
    data = make_slo_config_data(
        resource_threshold_config=threshold,
        resource_qos_config=qos,
        cpu_burst_config=burst,
        system_config=system,
    )
    loaded = sloconfig.load(data)
    spec, errors = nodeslo.merge_over_defaults(render.nodeslo_spec(loaded.config, POOL_A))
    assert errors == []
    assert spec.thresholds.enable is True
    assert spec.thresholds.cpu_suppress_threshold_percent == 50
    assert spec.cpu_burst_strategy is not None
    assert spec.cpu_burst_strategy.policy == "cfsQuotaBurstOnly"
    be = spec.resource_qos_strategy and spec.resource_qos_strategy.be_class
    assert be and be.cpu_qos and be.cpu_qos.enable is True
    assert be.memory_qos and be.memory_qos.wmark_ratio == 90


def read_fixture(name: str) -> dict[str, Any]:
    found = yaml.safe_load((FIXTURES / name).read_text(encoding="utf-8"))
    assert isinstance(found, dict)
    return found


def test_koordinators_chart_configmap_loads_unchanged() -> None:
    """The ConfigMap Koordinator's Helm chart installs loads without problems or warnings."""
    loaded = sloconfig.load(read_fixture("koordinator-chart-v1.8.0.yaml")["data"])
    assert (loaded.problems, loaded.warnings) == ((), ())
    assert thresholds(loaded, {})["enable"] is True
    policy = render.nodemetric_spec(loaded.config, {})["metricCollectPolicy"]
    assert policy["aggregateDurationSeconds"] == 300


def test_koordinators_api_doc_example_loads_all_its_valid_json() -> None:
    """Koordinator's doc example: the keys that are valid JSON load; the three that are not
    (they fail Koordinator's json.Unmarshal too) are reported and keep the defaults."""
    loaded = sloconfig.load(
        read_fixture("koordinator-api-doc-example.yaml")["data"], sloconfig.default_config()
    )
    assert sorted({p.key for p in loaded.problems}) == [
        "host-application-config",
        "resource-qos-config",
        "system-config",
    ]
    assert all("invalid JSON" in p.message for p in loaded.problems)
    assert loaded.warnings == ()
    spec = render.nodeslo_spec(loaded.config, {"kubernetes.io/kernel": "alios"})
    assert spec["cpuBurstStrategy"]["policy"] == "cfsQuotaBurstOnly"
    assert spec["cpuBurstStrategy"]["cfsQuotaBurstPercent"] == 400
