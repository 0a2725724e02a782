"""CRD models: NodeMetric, NodeSLO and PodMigrationJob JSON (kube.slo, nodeslo, migration)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from kube import migration, nodeslo, slo
from kube.classify import KoordQOS, PriorityClass
from kube.quantity import Resources
from tests import builders
from tests.builders import T0

FIVE_MIN = timedelta(minutes=5)


class TestNodeMetric:
    """The NodeMetric wire format."""

    def test_usage_is_a_resource_map_with_resources_wrapper(self) -> None:
        """Every usage is {"resources": {...}} with canonical CPU and plain bytes."""
        wire = builders.make_nodemetric_dict("n1", node_cpu="1500m", node_memory=123456789)
        usage = wire["status"]["nodeMetric"]["nodeUsage"]
        assert usage == {"resources": {"cpu": "1500m", "memory": "123456789"}}
        assert wire["status"]["updateTime"] == "2024-05-01T12:00:00Z"

    def test_spec_defaults_match_koordinator(self) -> None:
        """The default collect policy: 300s, 60s, 5m/10m/30m, usageWithoutPageCache."""
        assert slo.NodeMetric.for_node("n1").to_api()["spec"] == {
            "metricCollectPolicy": {
                "aggregateDurationSeconds": 300,
                "reportIntervalSeconds": 60,
                "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
                "nodeMemoryCollectPolicy": "usageWithoutPageCache",
            }
        }

    def test_model_round_trips(self) -> None:
        """from_api(to_api(m)) == m for a full NodeMetric."""
        metric = builders.make_nodemetric(
            "n1",
            node_cpu="3700m",
            pods={
                "a": "1200m",
                "ns/b": {"cpu": 1000, "memory": "1Gi", "priority": "koord-prod", "qos": "LSR"},
            },
        )
        assert slo.NodeMetric.from_api(metric.to_api()) == metric

    def test_canonical_wire_round_trips(self) -> None:
        """to_api(from_api(d)) == d for canonical JSON, including koordlet's shapes."""
        wire: dict[str, Any] = {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": "n1", "uid": "u", "resourceVersion": "7", "labels": {"a": "b"}},
            "spec": {"metricCollectPolicy": {"nodeAggregatePolicy": {}}},
            "status": {
                "updateTime": "2024-05-01T12:00:00Z",
                "nodeMetric": {
                    "nodeUsage": {"resources": {"cpu": "2", "memory": "1073741824"}},
                    "aggregatedNodeUsages": [
                        {
                            "usage": {"avg": {}, "p50": {}, "p90": {}, "p95": {}, "p99": {}},
                            "duration": "5m0s",
                        },
                        {"usage": {"p95": {"resources": {"cpu": "1999m"}}}, "duration": "1h0m0s"},
                    ],
                    "systemUsage": {},
                },
                "podsMetric": [
                    {
                        "name": "p",
                        "namespace": "d",
                        "podUsage": {},
                        "qos": "BE",
                        "extensions": {"x": [1]},
                    }
                ],
            },
        }
        assert slo.NodeMetric.from_api(wire).to_api() == wire

    def test_empty_aggregate_is_written_as_koordlet_writes_it(self) -> None:
        """A window without enough samples keeps its duration with empty ResourceMaps."""
        empty = slo.AggregatedUsage.empty(FIVE_MIN)
        assert not empty.has_data
        assert empty.to_api() == {
            "usage": {"avg": {}, "p50": {}, "p90": {}, "p95": {}, "p99": {}},
            "duration": "5m0s",
        }
        assert not slo.AggregatedUsage.from_api({"duration": "5m0s"}).has_data

    def test_aggregated_lookup(self) -> None:
        """aggregated() finds a window's value and treats empty as absent."""
        info = slo.NodeMetricInfo(
            aggregated_node_usages=(
                slo.AggregatedUsage(FIVE_MIN, {slo.AggregationType.P95: Resources({"cpu": 900})}),
                slo.AggregatedUsage.empty(timedelta(minutes=10)),
            )
        )
        assert info.aggregated(FIVE_MIN, slo.AggregationType.P95) == {"cpu": 900}
        assert info.aggregated(FIVE_MIN, slo.AggregationType.AVG) is None
        assert info.aggregated(timedelta(minutes=10), slo.AggregationType.P95) is None
        assert info.aggregated(timedelta(minutes=30), slo.AggregationType.P95) is None

    def test_pod_metric_omits_unset_classes_and_reads_unknown_as_none(self) -> None:
        """priority/qos are omitempty; unknown strings read as NONE."""
        pod = slo.PodMetricInfo(name="p", namespace="d")
        assert pod.to_api() == {"name": "p", "namespace": "d", "podUsage": {}}
        parsed = slo.PodMetricInfo.from_api({"name": "p", "priority": "gold", "qos": "LSR"})
        assert (parsed.priority, parsed.qos) == (PriorityClass.NONE, KoordQOS.LSR)

    def test_builder_derives_system_usage_and_sorts_pods(self) -> None:
        """System usage is node minus pods, floored at 0; podsMetric is sorted by key."""
        metric = builders.make_nodemetric(
            "n", node_cpu="3700m", pods={"z": "1200m", "a": 1000, "m": "600m"}
        )
        info = metric.status.node_metric
        assert info is not None and info.system_usage.cpu == 900
        assert [p.name for p in metric.status.pods_metric] == ["a", "m", "z"]
        small = builders.make_nodemetric(
            "n", node_cpu="100m", pods={"a": "500m"}
        ).status.node_metric
        assert small is not None and small.system_usage.cpu == 0

    def test_update_time_is_whole_seconds(self) -> None:
        """metav1.Time carries whole seconds; sub-second parts are dropped on the wire."""
        metric = builders.make_nodemetric("n", update_time=T0.replace(microsecond=500000))
        assert metric.to_api()["status"]["updateTime"] == "2024-05-01T12:00:00Z"


class TestNodeSLO:
    """NodeSLO parsing, defaults and merging."""

    def test_defaults_are_koordinators(self) -> None:
        """Built-in values: suppress 65 cpuset, evict 70 (lower 68), BE usage 90, burst 1000/300/-1/50."""
        spec, errors = nodeslo.merge_over_defaults(None)
        t, burst = spec.thresholds, spec.cpu_burst_strategy
        assert errors == []
        assert (t.enable, t.cpu_suppress_threshold_percent, t.cpu_suppress_policy) == (
            False,
            65,
            "cpuset",
        )
        assert (t.memory_evict_threshold_percent, t.memory_evict_lower_percent) == (70, 68)
        assert t.cpu_evict_be_usage_threshold_percent == 90
        assert burst is not None and (burst.policy, burst.cpu_burst_percent) == ("none", 1000)
        assert (burst.cfs_quota_burst_percent, burst.cfs_quota_burst_period_seconds) == (300, -1)
        assert burst.share_pool_threshold_percent == 50
        qos = spec.resource_qos_strategy
        assert qos is not None and qos.be_class is not None and qos.be_class.resctrl_qos is not None
        assert qos.be_class.resctrl_qos.cat_range_end_percent == 30

    def test_object_fields_override_and_nested_fields_merge(self) -> None:
        """Set fields win; siblings keep their defaults; the lower mark follows the threshold."""
        spec, errors = nodeslo.merge_over_defaults(
            {
                "resourceUsedThresholdWithBE": {"enable": True, "memoryEvictThresholdPercent": 80},
                "resourceQOSStrategy": {"beClass": {"memoryQOS": {"enable": True}}},
            }
        )
        assert errors == []
        t = spec.thresholds
        assert (t.enable, t.memory_evict_threshold_percent, t.memory_evict_lower_percent) == (
            True,
            80,
            78,
        )
        assert t.cpu_suppress_threshold_percent == 65
        be = spec.resource_qos_strategy.be_class  # type: ignore[union-attr]
        assert be is not None and be.memory_qos is not None
        assert (be.memory_qos.enable, be.memory_qos.wmark_min_adj) == (True, 50)

    @pytest.mark.parametrize(
        ("raw", "error"),
        [
            pytest.param(
                {"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": 150}},
                "spec.resourceUsedThresholdWithBE.cpuSuppressThresholdPercent: must be within [0, 100]"
                " (got 150)",
                id="out-of-range",
            ),
            pytest.param(
                {"resourceUsedThresholdWithBE": {"cpuSuppressPolicy": "magic"}},
                "spec.resourceUsedThresholdWithBE.cpuSuppressPolicy: must be one of: cpuset, cfsQuota",
                id="bad-enum",
            ),
            pytest.param(
                {"cpuBurstStrategy": {"cpuBurstPercent": "lots"}},
                "spec.cpuBurstStrategy.cpuBurstPercent: must be an integer, not a string",
                id="wrong-type",
            ),
            pytest.param(
                {"cpuBurstStrategy": {"cfsQuotaBurstPeriodSeconds": -2}},
                "spec.cpuBurstStrategy.cfsQuotaBurstPeriodSeconds: must be >= -1",
                id="below-minimum",
            ),
            pytest.param(
                {"systemStrategy": {"totalNetworkBandwidth": "fast"}},
                "spec.systemStrategy.totalNetworkBandwidth: invalid quantity 'fast'"
                ' (write it like "500m" or "2Gi")',
                id="bad-quantity",
            ),
            pytest.param(
                {"resourceQOSStrategy": {"lsClass": {"cpuQOS": {"enable": "yes"}}}},
                "spec.resourceQOSStrategy.lsClass.cpuQOS.enable: must be true or false, not a string",
                id="nested-path",
            ),
            pytest.param(
                {"bogus": 1},
                "spec.bogus: unknown field; known fields: resourceUsedThresholdWithBE,"
                " resourceQOSStrategy, cpuBurstStrategy, systemStrategy, extensions,"
                " hostApplications",
                id="unknown-field",
            ),
            pytest.param(
                {"cpuBurstStrategy": []},
                "spec.cpuBurstStrategy: must be a mapping, not a list",
                id="not-object",
            ),
            pytest.param(
                {"resourceUsedThresholdWithBE": {"memoryEvictLowerPercent": 75}},
                "spec.resourceUsedThresholdWithBE.memoryEvictLowerPercent: must be less than"
                " memoryEvictThresholdPercent (70)",
                id="lower-not-below-threshold",
            ),
            pytest.param(
                {"resourceQOSStrategy": {"beClass": {"resctrlQOS": {"catRangeStartPercent": 40}}}},
                "spec.resourceQOSStrategy.beClass.resctrlQOS.catRangeStartPercent: must be less than"
                " catRangeEndPercent (30)",
                id="cat-range",
            ),
        ],
    )
    def test_errors_name_the_field_and_keep_defaults(self, raw: dict[str, Any], error: str) -> None:
        """Each bad field is reported with its path; the merged spec stays usable."""
        spec, errors = nodeslo.merge_over_defaults(raw)
        assert errors == [error]
        assert spec.thresholds.cpu_suppress_threshold_percent == 65
        assert spec.thresholds.memory_evict_lower_percent == 68

    def test_opaque_sections_round_trip_and_merge(self) -> None:
        """blkioQOS, networkQOS, extensions and hostApplications survive unchanged."""
        raw: dict[str, Any] = {
            "resourceQOSStrategy": {
                "beClass": {
                    "blkioQOS": {
                        "blocks": [{"name": "/dev/sda", "type": "device", "ioCfg": {"readIOPS": 9}}]
                    }
                }
            },
            "extensions": {"vendor": {"x": [1, 2]}},
            "hostApplications": [{"name": "nginx", "qos": "LS"}],
        }
        parsed, errors = nodeslo.parse_spec(raw)
        assert errors == [] and parsed.to_api() == raw
        merged, _ = nodeslo.merge_over_defaults(raw)
        blkio = merged.resource_qos_strategy.be_class.blkio_qos  # type: ignore[union-attr]
        assert blkio == {
            "enable": False,
            "blocks": raw["resourceQOSStrategy"]["beClass"]["blkioQOS"]["blocks"],
        }

    def test_nodeslo_object_round_trips_and_rejects_invalid(self) -> None:
        """NodeSLO.from_api(to_api()) is exact; an invalid spec raises listing errors."""
        obj = nodeslo.NodeSLO(metadata=slo.ObjectMeta("n1"), spec=nodeslo.NodeSLOSpec.defaults())
        assert nodeslo.NodeSLO.from_api(obj.to_api()) == obj
        with pytest.raises(ValueError, match="cpuSuppressThresholdPercent"):
            nodeslo.NodeSLO.from_api(
                {
                    "metadata": {"name": "n"},
                    "spec": {"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": -1}},
                }
            )

    def test_defaults_are_not_shared_mutable_state(self) -> None:
        """Editing a to_api() dict does not change the defaults."""
        wire = nodeslo.NodeSLOSpec.defaults().to_api()
        wire["resourceQOSStrategy"]["beClass"]["blkioQOS"]["enable"] = True
        be = nodeslo.NodeSLOSpec.defaults().resource_qos_strategy.be_class  # type: ignore[union-attr]
        assert be is not None and be.blkio_qos == {"enable": False}


class TestPodMigrationJob:
    """The PodMigrationJob wire format."""

    def _job(self) -> migration.PodMigrationJob:
        return migration.PodMigrationJob(
            metadata=slo.ObjectMeta("job-1", labels={"owner": "nodeqos"}),
            spec=migration.PodMigrationJobSpec(
                pod_ref=migration.ObjectReference(namespace="default", name="p1", uid="u1"),
                ttl=FIVE_MIN,
                mode=migration.PodMigrationJobMode.EVICT_DIRECTLY,
                delete_options={"gracePeriodSeconds": 30},
            ),
            status=migration.PodMigrationJobStatus(
                phase=migration.PodMigrationJobPhase.FAILED,
                reason="FailedEvict",
                conditions=(
                    migration.Condition(
                        type="Eviction",
                        status="False",
                        reason="FailedEvict",
                        last_transition_time=T0,
                    ),
                ),
                preempted_pods_ref=(migration.ObjectReference(name="x", namespace="y"),),
            ),
        )

    def test_wire_shape(self) -> None:
        """Field names and omitempty follow Koordinator's Go types."""
        wire = self._job().to_api()
        assert (
            wire["apiVersion"] == "scheduling.koordinator.sh/v1alpha1"
            and wire["kind"] == "PodMigrationJob"
        )
        assert wire["spec"] == {
            "ttl": "5m0s",
            "mode": "EvictDirectly",
            "podRef": {"namespace": "default", "name": "p1", "uid": "u1"},
            "deleteOptions": {"gracePeriodSeconds": 30},
        }
        assert wire["status"]["conditions"] == [
            {
                "type": "Eviction",
                "status": "False",
                "lastTransitionTime": "2024-05-01T12:00:00Z",
                "reason": "FailedEvict",
            }
        ]

    def test_round_trips(self) -> None:
        """from_api(to_api(job)) == job."""
        job = self._job()
        assert migration.PodMigrationJob.from_api(job.to_api()) == job
        minimal = dataclasses.replace(job, status=migration.PodMigrationJobStatus())
        assert migration.PodMigrationJob.from_api(minimal.to_api()) == minimal

    @pytest.mark.parametrize(
        ("path", "value"),
        [
            pytest.param("spec", {"podRef": {"name": "p"}, "mode": "Teleport"}, id="bad-mode"),
            pytest.param("spec", {"podRef": {"name": "p"}, "ttl": "soon"}, id="bad-ttl"),
            pytest.param("status", {"phase": "Exploded"}, id="bad-phase"),
        ],
    )
    def test_invalid_values_raise(self, path: str, value: dict[str, Any]) -> None:
        """Unknown modes, phases and malformed durations raise ValueError."""
        obj: dict[str, Any] = {
            "metadata": {"name": "j"},
            "spec": {"podRef": {"name": "p"}},
            path: value,
        }
        with pytest.raises(ValueError):
            migration.PodMigrationJob.from_api(obj)
