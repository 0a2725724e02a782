"""The kind registry and label schema: what a sample or a query may name."""

from __future__ import annotations

import math

import pytest

from metriccache import KindRegistry, MetricCache, MetricKind, Sample, SchemaError, kinds
from tests.metriccache.builders import T0, FakeClock, container, node, pod


@pytest.fixture
def cache(clock: FakeClock) -> MetricCache:
    return MetricCache(kinds.default_registry(), clock=clock)


def test_registering_a_taken_name_raises() -> None:
    """A registry refuses a second kind with the same name."""
    registry = kinds.default_registry()
    with pytest.raises(SchemaError, match="already registered"):
        registry.register(MetricKind("pod_cpu_usage", ("pod_uid",), 60.0))


def test_default_registry_lists_every_builtin_with_its_retention() -> None:
    """Built-ins are all registered; pod kinds get the pod retention, others the node one."""
    registry = kinds.default_registry(node_retention_seconds=2000, pod_retention_seconds=300)
    assert len(registry) == len(kinds.BUILTIN_KINDS)
    assert registry.get("pod_cpu_usage").retention_seconds == 300
    assert registry.get("container_memory_usage").retention_seconds == 300
    assert registry.get("node_cpu_usage").retention_seconds == 2000
    assert kinds.default_registry().get("node_cpu_usage") is kinds.NODE_CPU_USAGE


def test_node_retention_serves_the_thirty_minute_aggregate() -> None:
    """Default node retention covers the longest NodeMetric window (30m)."""
    assert kinds.NODE_CPU_USAGE.retention_seconds >= 30 * 60
    assert kinds.POD_CPU_USAGE.retention_seconds == 10 * 60


def test_caller_can_extend_a_registry(clock: FakeClock) -> None:
    """A kind registered by the caller is stored and queried like a built-in."""
    registry = kinds.default_registry()
    gpu = registry.register(MetricKind("node_gpu_usage", ("minor",), 600.0, "cores"))
    cache = MetricCache(registry, clock=clock)
    cache.append([Sample(gpu, {"minor": "0"}, T0, 0.5)])
    assert cache.aggregate(gpu, {"minor": "0"}, T0 - 1, T0 + 1) is not None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"labels": ("a", "a")}, "duplicate label", id="duplicate-label"),
        pytest.param({"retention_seconds": 0.0}, "retention_seconds", id="zero-retention"),
        pytest.param({"name": ""}, "must not be empty", id="empty-name"),
    ],
)
def test_invalid_kind_definitions_raise(kwargs: dict[str, object], message: str) -> None:
    """MetricKind validates its own fields."""
    fields: dict[str, object] = {"name": "x", "labels": (), "retention_seconds": 1.0}
    fields.update(kwargs)
    with pytest.raises(SchemaError, match=message):
        MetricKind(**fields)  # type: ignore[arg-type]


def test_unknown_kind_is_an_error_naming_the_known_ones(cache: MetricCache) -> None:
    """Appending or querying an unregistered kind raises SchemaError listing known kinds."""
    stray = MetricKind("nope", (), 60.0)
    with pytest.raises(SchemaError, match=r"unknown metric kind 'nope'; known kinds: .*node_cpu"):
        cache.append([Sample(stray, {}, T0, 1.0)])
    with pytest.raises(SchemaError, match="unknown metric kind"):
        cache.aggregate(stray, {}, T0, T0)


def test_same_name_other_labels_is_an_error(cache: MetricCache) -> None:
    """A kind whose name is registered with another label schema is rejected."""
    impostor = MetricKind("pod_cpu_usage", ("pod_name",), 600.0)
    with pytest.raises(SchemaError, match="registered with labels"):
        cache.append([Sample(impostor, {"pod_name": "x"}, T0, 1.0)])


@pytest.mark.parametrize(
    "labels",
    [
        pytest.param({}, id="missing"),
        pytest.param({"pod_uid": "u1", "extra": "x"}, id="extra"),
        pytest.param({"pod_name": "u1"}, id="wrong-name"),
        pytest.param({"pod_uid": "u1", "container_id": "c"}, id="container-labels-on-pod-kind"),
    ],
)
def test_sample_labels_must_be_exactly_the_kinds(
    cache: MetricCache, labels: dict[str, str]
) -> None:
    """A sample carries exactly its kind's labels, no more, no fewer."""
    with pytest.raises(SchemaError, match="takes exactly the labels"):
        cache.append([Sample(kinds.POD_CPU_USAGE, labels, T0, 1.0)])


def test_a_bad_sample_rejects_the_whole_batch(cache: MetricCache, clock: FakeClock) -> None:
    """Validation happens before anything is stored."""
    bad = Sample(kinds.POD_CPU_USAGE, {}, T0, 1.0)
    with pytest.raises(SchemaError):
        cache.append([pod("u1", T0, 1.0), bad])
    assert cache.aggregate(kinds.POD_CPU_USAGE, {"pod_uid": "u1"}, T0 - 1, T0 + 1) is None
    assert cache.stats().series == 0


@pytest.mark.parametrize(
    "sample",
    [
        pytest.param(node(T0, math.nan), id="nan-value"),
        pytest.param(node(T0, math.inf), id="inf-value"),
        pytest.param(node(math.nan, 1.0), id="nan-time"),
        pytest.param(Sample(kinds.POD_CPU_USAGE, {"pod_uid": 7}, T0, 1.0), id="int-label"),  # type: ignore[dict-item]
        pytest.param(pod("u" * 129, T0, 1.0), id="label-too-long"),
    ],
)
def test_non_finite_numbers_and_odd_label_values_are_rejected(
    cache: MetricCache, sample: Sample
) -> None:
    """Values and times must be finite; label values short str."""
    with pytest.raises(SchemaError):
        cache.append([sample])


def test_single_series_query_needs_every_label(cache: MetricCache) -> None:
    """aggregate() names one series: a label subset is an error there."""
    cache.append([container("u1", "c1", T0, 1.0)])
    with pytest.raises(SchemaError, match="takes exactly the labels"):
        cache.aggregate(kinds.CONTAINER_CPU_USAGE, {"pod_uid": "u1"}, T0, T0)


def test_subset_query_rejects_unknown_labels(cache: MetricCache) -> None:
    """aggregate_all() accepts any subset of the kind's labels, nothing else."""
    with pytest.raises(SchemaError, match="has no label node"):
        cache.aggregate_all(kinds.POD_CPU_USAGE, {"node": "n1"}, T0, T0)


def test_registry_get_names_known_kinds() -> None:
    """KindRegistry.get of an unknown name lists what exists."""
    registry = KindRegistry((kinds.NODE_CPU_USAGE,))
    with pytest.raises(SchemaError, match="known kinds: node_cpu_usage"):
        registry.get("pod_cpu_usage")
    assert "node_cpu_usage" in registry
    assert list(registry) == [kinds.NODE_CPU_USAGE]
