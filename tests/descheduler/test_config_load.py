"""Loading real-world configuration files and the defaults they get (scenario D10)."""

from __future__ import annotations

import pathlib
import textwrap
from datetime import timedelta

import pytest

from descheduler import config
from descheduler.config import ConfigKind, ExtensionPoint, IntOrPercent
from descheduler.plugins import in_tree, lownodeload, migrationcontroller
from descheduler.plugins.defaultevictor import args as defaultevictor_args
from descheduler.plugins.lownodeutilization import args as lownodeutilization_args
from descheduler.plugins.migrationcontroller import args as migration_args
from kube import selectors as kube_selectors

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures" / "descheduler"


def load(text: str) -> config.DeschedulerConfiguration:
    return config.load_config(textwrap.dedent(text), plugins=in_tree())


@pytest.fixture(scope="module")
def koordinator() -> config.DeschedulerConfiguration:
    return config.load_config(FIXTURES / "koordinator-lownodeload.yaml", plugins=in_tree())


@pytest.fixture(scope="module")
def upstream() -> config.DeschedulerConfiguration:
    return config.load_config(FIXTURES / "upstream-policy.yaml", plugins=in_tree())


def test_koordinator_top_level(koordinator: config.DeschedulerConfiguration) -> None:
    """A Koordinator file keeps its kind, interval and leader election settings."""
    assert koordinator.kind is ConfigKind.KOORDINATOR
    assert koordinator.descheduling_interval == timedelta(seconds=10)
    assert koordinator.enable_profiling is True
    assert koordinator.leader_election.resource_namespace == "koordinator-system"
    assert koordinator.leader_election.lease_duration == timedelta(seconds=15)
    assert [profile.name for profile in koordinator.profiles] == ["koord-descheduler"]


def test_koordinator_plugins_are_merged_with_defaults(
    koordinator: config.DeschedulerConfiguration,
) -> None:
    """DefaultEvictor stays at filter by default; evict and balance are as written."""
    profile = koordinator.profiles[0]
    assert profile.enabled(ExtensionPoint.BALANCE) == ("LowNodeLoad",)
    assert profile.enabled(ExtensionPoint.EVICT) == ("MigrationController",)
    assert profile.enabled(ExtensionPoint.FILTER) == ("DefaultEvictor",)
    assert profile.enabled(ExtensionPoint.PRE_EVICTION_FILTER) == ("DefaultEvictor",)
    assert profile.enabled(ExtensionPoint.DESCHEDULE) == ()


def test_koordinator_lownodeload_args(koordinator: config.DeschedulerConfiguration) -> None:
    """Every LowNodeLoad field of the file arrives typed; the rest is defaulted."""
    args = koordinator.profiles[0].args(lownodeload.NAME)
    assert isinstance(args, lownodeload.Args)
    assert dict(args.low_thresholds) == {"cpu": 45, "memory": 55}
    assert dict(args.high_thresholds) == {"cpu": 75, "memory": 80}
    assert args.node_metric_expiration_seconds == 300
    assert args.evictable_namespaces == config.Namespaces(
        exclude=("kube-system", "koordinator-system")
    )
    assert dict(args.resource_weights) == {"cpu": 2, "memory": 1}
    assert args.anomaly_condition == lownodeload.args.AnomalyCondition(
        timeout=timedelta(minutes=1), consecutive_abnormalities=2, consecutive_normalities=3
    )
    assert args.node_fit is True
    assert args.detector_cache_timeout == timedelta(minutes=5)


def test_koordinator_node_pools_inherit_field_by_field(
    koordinator: config.DeschedulerConfiguration,
) -> None:
    """A pool keeps what it sets and takes every other field from the top level."""
    args = koordinator.profiles[0].args(lownodeload.NAME)
    assert isinstance(args, lownodeload.Args)
    batch, online = args.pools
    assert batch.name == "batch"
    assert dict(batch.high_thresholds) == {"cpu": 85, "memory": 90}
    assert batch.anomaly_condition.timeout == timedelta(minutes=2)
    assert batch.anomaly_condition.consecutive_abnormalities == 2  # inherited
    assert dict(online.low_thresholds) == {"cpu": 45, "memory": 55}  # inherited
    assert online.node_selector is not None
    assert online.node_selector.matches({"node-pool": "web"})
    assert not online.node_selector.matches({"node-pool": "batch"})


def test_koordinator_migration_controller_args(
    koordinator: config.DeschedulerConfiguration,
) -> None:
    """Quoted evictQPS, int and percent limits and job settings are parsed."""
    args = koordinator.profiles[0].args(migrationcontroller.NAME)
    assert isinstance(args, migrationcontroller.Args)
    assert args.evict_qps == 10.0
    assert args.max_migrating_per_node == 1
    assert args.max_unavailable_per_workload == IntOrPercent(20, percent=True)
    assert args.max_unavailable_per_workload.scaled(7) == 2
    assert args.default_job_mode is migration_args.JobMode.EVICT_DIRECTLY
    assert args.object_limiters["workload"].max_migrating == IntOrPercent(1)
    assert args.eviction_policy is migration_args.EvictionPolicy.EVICTION


def test_upstream_policy(upstream: config.DeschedulerConfiguration) -> None:
    """A kubernetes-sigs policy loads with string plugin names and a string nodeSelector."""
    assert upstream.kind is ConfigKind.UPSTREAM
    assert upstream.max_pods_to_evict_per_node == 10
    assert upstream.max_pods_to_evict_total == 20
    assert upstream.grace_period_seconds == 60
    assert upstream.node_selector is not None
    assert str(upstream.node_selector) == "node-role.kubernetes.io/worker,zone in (a,b)"
    profile = upstream.profiles[0]
    assert profile.enabled(ExtensionPoint.BALANCE) == (
        "RemoveDuplicates",
        "LowNodeUtilization",
        "RemovePodsViolatingTopologySpreadConstraint",
    )
    assert profile.enabled(ExtensionPoint.FILTER) == ("DefaultEvictor",)
    assert profile.enabled(ExtensionPoint.PRE_EVICTION_FILTER) == ("DefaultEvictor",)
    evictor = profile.args("DefaultEvictor")
    assert isinstance(evictor, defaultevictor_args.DefaultEvictorArgs)
    assert evictor.min_pod_age == timedelta(hours=1, minutes=30)
    assert evictor.pod_protections.extra_enabled == (
        defaultevictor_args.PodProtection.PODS_WITH_PVC,
    )
    utilization = profile.args("LowNodeUtilization")
    assert isinstance(utilization, lownodeutilization_args.LowNodeUtilizationArgs)
    assert dict(utilization.target_thresholds) == {"cpu": 50, "memory": 50, "pods": 50}
    assert utilization.eviction_limits == lownodeutilization_args.EvictionLimits(node=5)


def test_enabled_plugin_without_config_gets_default_args(
    upstream: config.DeschedulerConfiguration,
) -> None:
    """An enabled plugin with no pluginConfig entry still has Args."""
    profile = upstream.profiles[0]
    assert "RemovePodsViolatingInterPodAntiAffinity" in profile.plugin_config


def test_empty_koordinator_config_is_the_koordinator_default() -> None:
    """No profiles: one profile named koord-descheduler with DefaultEvictor (for now).

    MigrationController (Koordinator's default evictor) is not implemented yet;
    its Args still default as Koordinator's do.
    """
    loaded = load("""
        apiVersion: descheduler/v1alpha2
        kind: DeschedulerConfiguration
    """)
    (profile,) = loaded.profiles
    assert profile.name == "koord-descheduler"
    for point in (
        ExtensionPoint.FILTER,
        ExtensionPoint.PRE_EVICTION_FILTER,
        ExtensionPoint.EVICT,
    ):
        assert profile.enabled(point) == ("DefaultEvictor",), point
    assert "MigrationController" not in profile.plugin_config
    args = migrationcontroller.Args.from_mapping({})
    assert args.max_migrating_per_node == 2
    assert args.evict_qps == 10.0
    assert args.evict_burst == 1
    assert args.default_job_mode is migration_args.JobMode.EVICT_DIRECTLY
    assert args.default_job_ttl == timedelta(minutes=5)
    assert args.scheduler_names == ("koord-scheduler",)
    assert dict(args.object_limiters) == {
        "workload": migration_args.ObjectLimiter(duration=timedelta(minutes=5))
    }
    assert loaded.client_connection.qps == 50.0
    assert loaded.client_connection.burst == 100
    assert loaded.healthz_bind_address == "0.0.0.0:10251"
    assert loaded == config.default_configuration(plugins=in_tree())


def test_upstream_policy_without_profiles_has_none() -> None:
    """Upstream runs nothing when no profile is given, and so do we."""
    loaded = load("""
        apiVersion: descheduler/v1alpha2
        kind: DeschedulerPolicy
    """)
    assert loaded.profiles == ()


def test_disabled_star_removes_defaults() -> None:
    """`disabled` drops defaults ("*": all of them); enabled plugins are appended."""
    loaded = load("""
        apiVersion: descheduler/v1alpha2
        kind: DeschedulerConfiguration
        profiles:
        - name: p
          plugins:
            filter:
              disabled: [{name: "*"}]
              enabled: [{name: DefaultEvictor}]
            evict:
              disabled: [{name: DefaultEvictor}]
    """)
    profile = loaded.profiles[0]
    assert profile.enabled(ExtensionPoint.FILTER) == ("DefaultEvictor",)
    assert profile.enabled(ExtensionPoint.EVICT) == ()


@pytest.mark.parametrize("spelling", ["preEvictionFilter", "preevictionfilter"])
def test_upstream_lower_case_point_names(spelling: str) -> None:
    """Upstream's JSON tags are lower case; both spellings are read."""
    loaded = load(f"""
        apiVersion: descheduler/v1alpha2
        kind: DeschedulerPolicy
        profiles:
        - name: p
          plugins:
            {spelling}:
              disabled: ["*"]
    """)
    assert loaded.profiles[0].enabled(ExtensionPoint.PRE_EVICTION_FILTER) == ()
    assert loaded.profiles[0].enabled(ExtensionPoint.FILTER) == ("DefaultEvictor",)


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        pytest.param(":10251", "0.0.0.0:10251", id="empty-host"),
        pytest.param("127.0.0.1", "127.0.0.1:10251", id="bare-ip"),
        pytest.param("[::1]:9000", "[::1]:9000", id="ipv6"),
        pytest.param("localhost:0", "localhost:0", id="hostname"),
    ],
)
def test_bind_addresses_are_normalised_like_koordinator(written: str, expected: str) -> None:
    """Koordinator fills in the host and default port of bind addresses."""
    loaded = load(f"""
        apiVersion: descheduler/v1alpha2
        kind: DeschedulerConfiguration
        healthzBindAddress: "{written}"
    """)
    assert loaded.healthz_bind_address == expected


def test_top_level_node_selector_mapping_form() -> None:
    """Koordinator writes the top-level nodeSelector as a LabelSelector."""
    loaded = load("""
        apiVersion: descheduler/v1alpha2
        kind: DeschedulerConfiguration
        nodeSelector:
          matchLabels: {pool: online}
    """)
    assert loaded.node_selector == kube_selectors.parse_selector("pool=online")


def test_eviction_caps_are_on_by_default() -> None:
    """Safe defaults: 5 per node and 20 per cycle, per namespace unset (unlimited)."""
    for kind in ConfigKind:
        loaded = config.default_configuration(kind, plugins=in_tree())
        assert loaded.max_pods_to_evict_per_node == 5
        assert loaded.max_pods_to_evict_total == 20
        assert loaded.max_pods_to_evict_per_namespace is None


def test_upstream_policy_gets_default_evictor_at_every_evictor_point() -> None:
    """Both kinds default to DefaultEvictor at filter, preEvictionFilter and evict."""
    loaded = load("""
        apiVersion: descheduler/v1alpha2
        kind: DeschedulerPolicy
        profiles:
        - name: p
    """)
    profile = loaded.profiles[0]
    for point in (
        ExtensionPoint.FILTER,
        ExtensionPoint.PRE_EVICTION_FILTER,
        ExtensionPoint.EVICT,
    ):
        assert profile.enabled(point) == ("DefaultEvictor",), point


@pytest.mark.parametrize(
    ("written", "per_node", "total"),
    [
        pytest.param("maxNoOfPodsToEvictPerNode: 0\n", 0, 20, id="zero-means-evict-nothing"),
        pytest.param("maxNoOfPodsToEvictPerNode: null\n", 5, 20, id="null-means-default"),
        pytest.param("maxNoOfPodsToEvictTotal: 100000\n", 5, 100000, id="large-lifts-the-cap"),
    ],
)
def test_explicit_eviction_caps(written: str, per_node: int, total: int) -> None:
    """Any value is allowed; 0 evicts nothing (as upstream), null keeps the default."""
    loaded = config.load_config(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n" + written,
        plugins=in_tree(),
    )
    assert loaded.max_pods_to_evict_per_node == per_node
    assert loaded.max_pods_to_evict_total == total
