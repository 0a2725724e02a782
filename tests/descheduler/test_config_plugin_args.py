"""Each plugin's Args: upstream/Koordinator defaults and rules, and the plugin catalog."""

from __future__ import annotations

from datetime import timedelta

import pytest

from descheduler import config, plugins
from descheduler.config import ExtensionPoint, catalog, model
from descheduler.plugins import (
    defaultevictor,
    lownodeload,
    migrationcontroller,
    removepodsviolatingtopologyspreadconstraint,
)
from descheduler.plugins.defaultevictor import args as evictor_args


def errors_of(args_type: type[config.PluginArgs], raw: object) -> list[str]:
    """The problems `raw` has as Args of `args_type` (paths relative to the args)."""
    with pytest.raises(config.ConfigError) as caught:
        args_type.from_mapping(raw)
    return [str(error) for error in caught.value.errors]


def test_every_in_tree_plugin_declares_name_args_and_points() -> None:
    """The catalog is complete and each Args kind is "<NAME>Args"."""
    specs = plugins.in_tree()
    assert len(specs) == 15
    for name, spec in specs.items():
        kind = spec.args.KIND
        assert kind == f"{name}Args"
        assert spec.extension_points
        assert spec.extension_points <= set(ExtensionPoint)


def test_default_plugins_exist_and_serve_their_points() -> None:
    """Every default plugin of every kind is in-tree and can run where it is put."""
    specs = plugins.in_tree()
    for points in model.DEFAULT_PLUGINS.values():
        for point, names in points.items():
            for name in names:
                assert point in specs[name].extension_points, (name, point)


def test_catalog_rejects_a_taken_name() -> None:
    """Registering the same plugin name twice is a programming error."""
    spec = catalog.PluginSpec("X", lownodeload.Args, frozenset({ExtensionPoint.BALANCE}))
    with pytest.raises(ValueError, match="registered twice"):
        catalog.build([spec, spec])


def test_loader_checks_against_the_catalog_it_is_given() -> None:
    """A custom catalog (the later Registry) decides which plugins are known."""
    only = catalog.build(
        [catalog.PluginSpec("LowNodeLoad", lownodeload.Args, frozenset({ExtensionPoint.BALANCE}))]
    )
    text = (
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"
        "profiles:\n- name: p\n  plugins:\n    balance:\n      enabled: [LowNodeLoad, RemoveDuplicates]\n"
    )
    with pytest.raises(config.ConfigError) as caught:
        config.load_config(text, plugins=only)
    assert [str(error) for error in caught.value.errors] == [
        'profiles[0].plugins.balance.enabled[1]: unknown plugin "RemoveDuplicates"; known plugins: LowNodeLoad'
        " (an out-of-tree plugin must be installed in the descheduler's environment, its package"
        ' declaring an entry point "RemoveDuplicates" in group "nodeqos.descheduler.plugins")'
    ]


def test_lownodeload_defaults() -> None:
    """Koordinator's SetDefaults_LowNodeLoadArgs values."""
    args = lownodeload.Args.from_mapping({})
    assert args.node_fit is True
    assert args.node_metric_expiration_seconds == 180
    assert args.anomaly_condition == lownodeload.args.AnomalyCondition(
        timeout=timedelta(minutes=1), consecutive_abnormalities=5, consecutive_normalities=3
    )
    assert args.detector_cache_timeout == timedelta(minutes=5)
    assert dict(args.resource_weights) == {"cpu": 1, "memory": 1}
    (pool,) = args.pools
    assert pool.name == "__default_node_pool__"


def test_lownodeload_anomaly_fields_default_one_by_one() -> None:
    """Setting one anomalyCondition field keeps the other two defaults (Koordinator's
    else-if chain would leave consecutiveNormalities at 0 here)."""
    args = lownodeload.Args.from_mapping({"anomalyCondition": {"consecutiveAbnormalities": 1}})
    assert args.anomaly_condition.consecutive_normalities == 3
    assert args.anomaly_condition.timeout == timedelta(minutes=1)


def test_lownodeload_threshold_resources_get_weights() -> None:
    """Resources named in thresholds weigh 1 unless weighted explicitly."""
    args = lownodeload.Args.from_mapping(
        {
            "lowThresholds": {"cpu": 10, "nvidia.com/gpu": 10},
            "highThresholds": {"cpu": 20, "nvidia.com/gpu": 20},
            "resourceWeights": {"memory": 3},
        }
    )
    assert dict(args.resource_weights) == {"cpu": 1, "memory": 3, "nvidia.com/gpu": 1}


def test_lownodeload_error_paths_are_relative_to_the_given_path() -> None:
    """from_mapping prefixes every path with the caller's."""
    path = config.FieldPath("args")
    with pytest.raises(config.ConfigError) as caught:
        lownodeload.Args.from_mapping({"numberOfNodes": -1}, path)
    assert [str(error) for error in caught.value.errors] == ["args.numberOfNodes: must be >= 0"]


def test_migration_controller_empty_lists_take_defaults() -> None:
    """Koordinator treats empty schedulerNames / objectLimiters as unset."""
    args = migrationcontroller.Args.from_mapping({"schedulerNames": [], "objectLimiters": {}})
    assert args.scheduler_names == ("koord-scheduler",)
    assert set(args.object_limiters) == {"workload"}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param({"evictQPS": 0}, ["evictQPS: must be > 0"], id="qps-zero"),
        pytest.param({"evictBurst": 0}, ["evictBurst: must be >= 1"], id="burst-zero"),
        pytest.param(
            {"maxConcurrentReconciles": 0},
            ["maxConcurrentReconciles: must be >= 1"],
            id="reconciles",
        ),
        pytest.param(
            {"objectLimiters": {"pod": {"duration": "1m"}}},
            ["objectLimiters: key 'pod': must be one of: workload, namespace"],
            id="limiter-kind",
        ),
        pytest.param(
            {"skipEvictionGates": ["Everything"]},
            ["skipEvictionGates[0]: must be one of: MaxUnavailablePerWorkload,"],
            id="gate",
        ),
        pytest.param(
            {"evictionPolicy": "Evict"},
            ["evictionPolicy: must be one of: Eviction, Delete, SoftEviction (got 'Evict')"],
            id="policy",
        ),
        pytest.param(
            {"defaultJobMode": "Reserve"},
            ["defaultJobMode: must be one of: ReservationFirst, EvictDirectly (got 'Reserve')"],
            id="job-mode",
        ),
        pytest.param(
            {"nodeSelector": {"a": "b"}},
            ["nodeSelector: must be a selector string"],
            id="selector-form",
        ),
        pytest.param(
            {"priorityThreshold": {"value": 10, "name": "high"}},
            ["priorityThreshold: only one of value and name may be set"],
            id="priority-both",
        ),
    ],
)
def test_migration_controller_rules(raw: object, expected: list[str]) -> None:
    """Koordinator's ValidateMigrationControllerArgs plus enum checks."""
    found = errors_of(migrationcontroller.Args, raw)
    assert len(found) == len(expected), found
    for line, prefix in zip(found, expected, strict=True):
        assert line.startswith(prefix), line


def test_default_evictor_defaults_follow_upstream() -> None:
    """Upstream DefaultEvictorArgs, noEvictionPolicy Preferred; but nodeFit on (safe default)."""
    args = defaultevictor.Args.from_mapping({"noEvictionPolicy": ""})
    assert args == defaultevictor.Args()
    assert args.node_fit is True
    assert args.no_eviction_policy is evictor_args.NoEvictionPolicy.PREFERRED


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            {
                "evictLocalStoragePods": True,
                "podProtections": {"defaultDisabled": ["DaemonSetPods"]},
            },
            ["podProtections: cannot be combined with the deprecated evict*/ignore* fields"],
            id="deprecated-and-protections",
        ),
        pytest.param(
            {"podProtections": {"extraEnabled": ["DaemonSetPods"]}},
            [
                "podProtections.extraEnabled[0]: DaemonSetPods cannot be used here; allowed: PodsWithPVC,"
            ],
            id="protection-in-wrong-list",
        ),
        pytest.param(
            {"podProtections": {"defaultDisabled": ["FailedBarePods", "FailedBarePods"]}},
            ["podProtections.defaultDisabled[1]: FailedBarePods is listed twice"],
            id="protection-twice",
        ),
        pytest.param(
            {
                "podProtections": {
                    "extraEnabled": ["PodsWithPVC"],
                    "config": {"PodsWithPVC": {"protectedStorageClasses": [{}]}},
                }
            },
            ["podProtections.config.PodsWithPVC.protectedStorageClasses[0].name: required"],
            id="storage-class-name",
        ),
        pytest.param(
            {"noEvictionPolicy": "Sometimes"},
            ["noEvictionPolicy: must be one of: Preferred, Mandatory"],
            id="policy",
        ),
    ],
)
def test_default_evictor_rules(raw: object, expected: list[str]) -> None:
    """Upstream ValidateDefaultEvictorArgs, with paths."""
    found = errors_of(defaultevictor.Args, raw)
    assert len(found) == len(expected), found
    for line, prefix in zip(found, expected, strict=True):
        assert line.startswith(prefix), line


UPSTREAM_RULES = [
    pytest.param(
        "RemovePodsViolatingNodeAffinity", {}, "nodeAffinityType: required", id="node-affinity-type"
    ),
    pytest.param(
        "RemovePodsViolatingNodeTaints",
        {"includedTaints": ["a"], "excludedTaints": ["b"]},
        "only one of includedTaints and excludedTaints may be set",
        id="taints-both",
    ),
    pytest.param(
        "RemovePodsHavingTooManyRestarts", {}, "podRestartThreshold: must be >= 1", id="restarts"
    ),
    pytest.param(
        "RemovePodsHavingTooManyRestarts",
        {"podRestartThreshold": 3, "states": ["Pending"]},
        "states[0]: must be one of: Running, CrashLoopBackOff",
        id="restart-states",
    ),
    pytest.param(
        "PodLifeTime",
        {},
        "set at least one of maxPodLifeTimeSeconds, states",
        id="lifetime-criterion",
    ),
    pytest.param(
        "PodLifeTime",
        {"maxPodLifeTimeSeconds": 60, "conditions": [{}]},
        "conditions[0]: set at least one of type, status, reason",
        id="lifetime-empty-condition",
    ),
    pytest.param(
        "PodLifeTime",
        {"states": ["Sleeping"]},
        "states[0]: must be one of: Running, Pending,",
        id="lifetime-state",
    ),
    pytest.param(
        "RemoveDuplicates",
        {"namespaces": {"include": ["a"], "exclude": ["b"]}},
        "namespaces: only one of include and exclude may be set",
        id="duplicates-namespaces",
    ),
    pytest.param(
        "RemovePodsViolatingTopologySpreadConstraint",
        {"constraints": ["Sometimes"]},
        "constraints[0]: must be one of: DoNotSchedule, ScheduleAnyway",
        id="spread-constraint",
    ),
    pytest.param(
        "LowNodeUtilization",
        {"thresholds": {"cpu": 60}, "targetThresholds": {"cpu": 50}},
        "thresholds.cpu: must not exceed targetThresholds.cpu (50)",
        id="lnu-order",
    ),
    pytest.param(
        "LowNodeUtilization",
        {
            "thresholds": {"cpu": 20},
            "targetThresholds": {"cpu": 50},
            "evictableNamespaces": {"include": ["a"]},
        },
        "evictableNamespaces.include: not supported here; only exclude may be set",
        id="lnu-include",
    ),
    pytest.param(
        "LowNodeUtilization",
        {
            "thresholds": {"cpu": 20},
            "targetThresholds": {"cpu": 50},
            "metricsUtilization": {"source": "Prometheus"},
        },
        "metricsUtilization.prometheus.query: required when source is Prometheus",
        id="lnu-prometheus-query",
    ),
    pytest.param(
        "LowNodeUtilization",
        {
            "thresholds": {"cpu": 20},
            "targetThresholds": {"cpu": 50},
            "useNodeMetrics": True,
            "metricsUtilization": {"metricsServer": True},
        },
        "useNodeMetrics: cannot be combined with metricsUtilization; pick one source",
        id="lnu-two-sources",
    ),
    pytest.param(
        "HighNodeUtilization",
        {"thresholds": {"cpu": 20}, "evictionModes": ["All"]},
        "evictionModes[0]: must be one of: OnlyThresholdingResources",
        id="hnu-mode",
    ),
]


@pytest.mark.parametrize(("name", "raw", "expected"), UPSTREAM_RULES)
def test_upstream_plugin_rules(name: str, raw: object, expected: str) -> None:
    """kubernetes-sigs/descheduler validation rules, one error each, with its path."""
    (line,) = errors_of(plugins.in_tree()[name].args, raw)
    assert line.startswith(expected), line


def test_upstream_defaults() -> None:
    """RemoveFailedPods waits an hour; topology spread balances DoNotSchedule with nodeFit."""
    failed = plugins.in_tree()["RemoveFailedPods"].args.from_mapping({})
    assert failed.to_mapping()["minPodLifetimeSeconds"] == 3600
    spread = removepodsviolatingtopologyspreadconstraint.Args.from_mapping({"constraints": []})
    assert spread.constraints == (
        removepodsviolatingtopologyspreadconstraint.args.Constraint.DO_NOT_SCHEDULE,
    )
    assert spread.topology_balance_node_fit is True


def test_deviation_thresholds_may_have_low_above_target() -> None:
    """With useDeviationThresholds the two maps are distances from the mean: any order."""
    args = plugins.in_tree()["LowNodeUtilization"].args.from_mapping(
        {"useDeviationThresholds": True, "thresholds": {"cpu": 30}, "targetThresholds": {"cpu": 10}}
    )
    assert args.to_mapping()["thresholds"] == {"cpu": 30}
