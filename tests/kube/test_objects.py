"""Pod and node views built from API JSON (kube.objects)."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kube import constraints, objects
from kube.classify import KoordQOS, KubeQOS, PriorityClass
from tests import builders
from tests.builders import T0

Mi, Gi = 2**20, 2**30


class TestPodBasics:
    """Identity, ownership and classification of a pod."""

    def test_builder_defaults_follow_the_scenarios(self) -> None:
        """A default pod: on n1, 100m/128Mi, ReplicaSet-owned, priority 0, Burstable."""
        pod = builders.make_pod("p1")
        assert (pod.name, pod.namespace, pod.node_name, pod.key) == (
            "p1",
            "default",
            "n1",
            "default/p1",
        )
        assert pod.requests == {"cpu": 100, "memory": 128 * Mi}
        assert pod.priority == 0 and pod.koord_priority_class is PriorityClass.NONE
        assert (pod.kube_qos, pod.koord_qos) == (KubeQOS.BURSTABLE, KoordQOS.LS)
        ref = pod.controller_ref
        assert ref is not None and (ref.kind, ref.api_version, ref.controller) == (
            "ReplicaSet",
            "apps/v1",
            True,
        )
        assert not (
            pod.has_local_storage or pod.has_pvc or pod.is_terminating or pod.is_daemonset_pod
        )

    def test_metadata_fields(self) -> None:
        """uid, labels, priority class name, phase, reason and resourceVersion are kept."""
        raw = builders.make_pod_dict(
            "p",
            uid="u-1",
            labels={"app": "web"},
            priority=9100,
            priority_class_name="high",
            phase="Failed",
        )
        raw["status"]["reason"] = "Evicted"
        pod = objects.Pod.from_api(raw)
        assert (pod.uid, pod.labels, pod.priority_class_name) == ("u-1", {"app": "web"}, "high")
        assert (pod.phase, pod.reason, pod.resource_version) == ("Failed", "Evicted", "1")
        assert pod.koord_priority_class is PriorityClass.PROD

    def test_unscheduled_pod_has_empty_node_name(self) -> None:
        """A pending, unbound pod reads node_name "" and priority None when unset."""
        pod = builders.make_pod("p", node=None, priority=None, phase="Pending", started=None)
        assert (pod.node_name, pod.priority, pod.start_time) == ("", None, None)

    def test_daemonset_pod_and_pods_without_owner(self) -> None:
        """is_daemonset_pod reads every owner reference; no owner means bare, no workload."""
        assert builders.make_pod("ds", owner="DaemonSet").is_daemonset_pod
        loose = builders.make_pod("ds2", owner="DaemonSet", owner_controller=False)
        assert loose.controller_ref is None
        assert loose.is_daemonset_pod
        assert not builders.make_pod("rs", owner="ReplicaSet").is_daemonset_pod
        bare = builders.make_pod("bare", owner=None)
        assert (bare.controller_ref, bare.workload_ref, bare.is_bare) == (None, None, True)

    def test_workload_ref_falls_back_to_the_first_owner(self) -> None:
        """Without a controller reference the first owner stands for the workload."""
        pod = builders.make_pod("p", owner="ReplicaSet", owner_controller=False)
        assert pod.workload_ref is not None
        assert (pod.workload_ref.kind, pod.is_bare) == ("ReplicaSet", False)

    def test_annotations_are_kept_except_last_applied(self) -> None:
        """Arbitrary annotations stay readable; kubectl's manifest copy is dropped."""
        pod = builders.make_pod(
            "p",
            annotations={
                "descheduler.alpha.kubernetes.io/evict": "true",
                "controller.kubernetes.io/pod-deletion-cost": "-5",
                "kubectl.kubernetes.io/last-applied-configuration": "{" + "x" * 5000 + "}",
            },
        )
        assert pod.annotations == {
            "descheduler.alpha.kubernetes.io/evict": "true",
            "controller.kubernetes.io/pod-deletion-cost": "-5",
        }

    @pytest.mark.parametrize(
        ("annotations", "mirror", "static"),
        [
            pytest.param({}, False, False, id="api-pod"),
            pytest.param({"kubernetes.io/config.source": "api"}, False, False, id="source-api"),
            pytest.param({"kubernetes.io/config.source": "file"}, False, True, id="static"),
            pytest.param(
                {"kubernetes.io/config.mirror": "abc", "kubernetes.io/config.source": "file"},
                True,
                True,
                id="mirror",
            ),
        ],
    )
    def test_mirror_and_static(
        self, annotations: dict[str, str], mirror: bool, static: bool
    ) -> None:
        """Mirror pods carry config.mirror; static pods a config.source other than api."""
        pod = builders.make_pod("p", annotations=annotations)
        assert (pod.is_mirror, pod.is_static) == (mirror, static)

    def test_view_is_immutable(self) -> None:
        """Pods are frozen and slotted; their mappings are read-only."""
        pod = builders.make_pod("p", labels={"a": "b"})
        with pytest.raises(dataclasses.FrozenInstanceError):
            pod.name = "q"  # type: ignore[misc]
        with pytest.raises(TypeError):
            pod.labels["a"] = "c"  # type: ignore[index]
        assert not hasattr(pod, "__dict__")

    def test_pods_of_one_shape_share_resources(self) -> None:
        """Equal requests are one object across pods (keeps a big cache small)."""
        a, b = builders.make_pod("a"), builders.make_pod("b")
        assert a.requests is b.requests and a.containers[0].limits is b.containers[0].limits

    def test_malformed_quantity_raises(self) -> None:
        """A garbled request raises ValueError naming it."""
        with pytest.raises(ValueError, match="banana"):
            builders.make_pod("p", cpu="banana")


def _c(cpu: str, *, sidecar: bool = False, limits: dict[str, str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": f"c{cpu}",
        "image": "i",
        "resources": {"requests": {"cpu": cpu}},
    }
    if limits:
        container["resources"]["limits"] = limits
    if sidecar:
        container["restartPolicy"] = "Always"
    return container


@pytest.mark.parametrize(
    ("spec", "cpu"),
    [
        pytest.param({"containers": [_c("100m"), _c("200m")]}, 300, id="containers-add-up"),
        pytest.param(
            {"containers": [_c("100m")], "initContainers": [_c("500m"), _c("200m")]},
            500,
            id="init-peak",
        ),
        pytest.param(
            {"containers": [_c("600m")], "initContainers": [_c("500m")]}, 600, id="app-peak"
        ),
        pytest.param(
            {"containers": [_c("100m")], "initContainers": [_c("50m", sidecar=True), _c("500m")]},
            550,
            id="sidecar-adds-to-later-init",
        ),
        pytest.param(
            {"containers": [_c("100m")], "initContainers": [_c("500m"), _c("50m", sidecar=True)]},
            500,
            id="sidecar-after-init",
        ),
        pytest.param(
            {"containers": [_c("100m")], "initContainers": [_c("300m", sidecar=True)]},
            400,
            id="sidecar-adds-to-app",
        ),
        pytest.param({"containers": [_c("100m")], "overhead": {"cpu": "250m"}}, 350, id="overhead"),
        pytest.param(
            {"containers": [_c("100m")], "resources": {"requests": {"cpu": "2"}}},
            2000,
            id="pod-level-resources",
        ),
        pytest.param(
            {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}]},
            1000,
            id="limits-default",
        ),
    ],
)
def test_effective_requests_match_the_scheduler(spec: dict[str, Any], cpu: int) -> None:
    """Pod.requests is the scheduler's PodRequests (init peaks, sidecars, overhead)."""
    raw = builders.make_pod_dict("p")
    raw["spec"].update(spec)
    assert objects.Pod.from_api(raw).requests.cpu == cpu


def test_container_views() -> None:
    """Containers keep name, image, defaulted requests, limits and sidecar policy."""
    pod = builders.make_pod(
        "p",
        qos=KubeQOS.GUARANTEED,
        init_containers=[_c("10m", sidecar=True, limits={"cpu": "20m"})],
    )
    (main,), (init,) = pod.containers, pod.init_containers
    assert (main.name, main.image) == ("main", "registry.local/app:1")
    assert main.requests == main.limits == {"cpu": 100, "memory": 128 * Mi}
    assert init.requests == {"cpu": 10} and init.limits == {"cpu": 20}
    assert init.restart_policy == "Always"


def test_scheduling_constraints_are_parsed() -> None:
    """Tolerations, node selector, affinities and spread constraints become typed views."""
    term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}
    pod = builders.make_pod(
        "p",
        node_selector={"disk": "ssd"},
        tolerations=[
            {"key": "k", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "j", "value": "v"},
        ],
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
                    ]
                }
            },
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]},
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {**term, "namespaceSelector": {}, "namespaces": ["x"]}
                ]
            },
        },
        topology_spread=[
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {},
            }
        ],
    )
    assert pod.tolerations == (
        constraints.Toleration("k", "Exists", "", "NoSchedule"),
        constraints.Toleration("j", "Equal", "v", ""),
    )
    assert pod.node_selector == {"disk": "ssd"}
    assert pod.required_node_affinity is not None and pod.required_node_affinity.matches(
        {"zone": "z1"}, "n"
    )
    (affinity,), (anti,) = pod.pod_affinity, pod.pod_anti_affinity
    assert affinity.label_selector.matches({"app": "db"}) and affinity.namespace_selector is None
    assert (
        anti.namespaces == ("x",)
        and anti.namespace_selector is not None
        and anti.namespace_selector.is_everything
    )
    (spread,) = pod.topology_spread_constraints
    assert (spread.max_skew, spread.topology_key, spread.when_unsatisfiable) == (
        1,
        "zone",
        "DoNotSchedule",
    )
    assert (spread.node_affinity_policy, spread.node_taints_policy, spread.min_domains) == (
        "Honor",
        "Ignore",
        None,
    )


def test_spread_constraint_without_selector_selects_nothing() -> None:
    """A missing labelSelector counts no pods, as the scheduler reads it."""
    pod = builders.make_pod(
        "p",
        topology_spread=[
            {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
        ],
    )
    assert not pod.topology_spread_constraints[0].label_selector.matches({})


@pytest.mark.parametrize(
    ("volumes", "local", "pvc"),
    [
        pytest.param([{"name": "a", "emptyDir": {}}], True, False, id="empty-dir"),
        pytest.param([{"name": "a", "hostPath": {"path": "/x"}}], True, False, id="host-path"),
        pytest.param(
            [{"name": "a", "persistentVolumeClaim": {"claimName": "c"}}], False, True, id="pvc"
        ),
        pytest.param([{"name": "a", "configMap": {"name": "c"}}], False, False, id="config-map"),
    ],
)
def test_volume_summary(volumes: list[dict[str, Any]], local: bool, pvc: bool) -> None:
    """Local storage means emptyDir or hostPath; PVCs are flagged separately."""
    raw = builders.make_pod_dict("p")
    raw["spec"]["volumes"] = volumes
    pod = objects.Pod.from_api(raw)
    assert (pod.has_local_storage, pod.has_pvc) == (local, pvc)


def test_times_are_utc_aware() -> None:
    """Creation, start and deletion times parse to aware UTC datetimes."""
    pod = builders.make_pod(
        "p", created=T0 - timedelta(hours=1), deleting=T0 + timedelta(seconds=30)
    )
    assert pod.creation_timestamp == T0 - timedelta(hours=1) and pod.start_time == T0
    assert pod.deletion_timestamp == T0 + timedelta(seconds=30) and pod.is_terminating
    assert pod.start_time is not None and pod.start_time.tzinfo is UTC


def test_parse_and_format_time() -> None:
    """API times convert from any offset to UTC and print with whole seconds."""
    assert objects.parse_time("2024-05-01T14:00:00+02:00") == T0
    assert objects.parse_time("2024-05-01T12:00:00.123456Z") == T0.replace(microsecond=123456)
    assert objects.parse_time(None) is None
    assert objects.format_time(T0.replace(microsecond=999999)) == "2024-05-01T12:00:00Z"
    with pytest.raises(ValueError, match="time zone"):
        objects.format_time(datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="yesterday"):
        objects.parse_time("yesterday")


def test_statuses_and_conditions() -> None:
    """Container states, restart counts and conditions are kept."""
    statuses = [
        {
            "name": "a",
            "ready": False,
            "restartCount": 7,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        },
        {
            "name": "b",
            "restartCount": 1,
            "state": {"terminated": {"reason": "Error", "exitCode": 137}},
        },
        {"name": "c", "ready": True, "state": {"running": {}}},
    ]
    raw = builders.make_pod_dict("p", container_statuses=statuses, ready=False)
    raw["status"]["initContainerStatuses"] = [{"name": "i", "restartCount": 2, "state": {}}]
    pod = objects.Pod.from_api(raw)
    a, b, c = pod.container_statuses
    assert (a.waiting_reason, a.restart_count, a.ready) == ("CrashLoopBackOff", 7, False)
    assert (b.terminated_reason, b.terminated_exit_code, b.running) == ("Error", 137, False)
    assert (c.running, c.ready, c.waiting_reason) == (True, True, None)
    assert pod.init_container_statuses[0].restart_count == 2
    assert pod.condition("Ready") == "False" and pod.condition("PodScheduled") is None


class TestNode:
    """The node view."""

    def test_builder_defaults(self) -> None:
        """A default node: 4 CPUs, 16Gi, 110 pods, Ready, schedulable, untainted."""
        node = builders.make_node("n1")
        assert node.allocatable == {"cpu": 4000, "memory": 16 * Gi, "pods": 110}
        assert node.capacity == node.allocatable
        assert (node.name, node.ready, node.unschedulable, node.taints) == ("n1", True, False, ())
        assert node.labels["kubernetes.io/hostname"] == "n1" and node.raw_allocatable is None

    def test_taints_unschedulable_and_readiness(self) -> None:
        """Taints parse from the spec; readiness is the Ready condition being True."""
        node = builders.make_node(
            "n",
            taints=["dedicated=db:NoSchedule", "gpu:NoExecute"],
            unschedulable=True,
            ready=False,
        )
        assert node.taints == (
            constraints.Taint("dedicated", "db", "NoSchedule"),
            constraints.Taint("gpu", "", "NoExecute"),
        )
        assert node.unschedulable and not node.ready and node.condition("Ready") == "False"

    def test_node_without_conditions_is_not_ready(self) -> None:
        """No Ready condition means not ready."""
        raw = builders.make_node_dict("n")
        del raw["status"]["conditions"]
        assert not objects.Node.from_api(raw).ready

    def test_raw_allocatable_annotation(self) -> None:
        """Koordinator's raw-allocatable annotation parses into Resources."""
        raw_alloc = json.dumps({"cpu": "8", "memory": "32Gi"})
        node = builders.make_node("n", annotations={objects.ANNOTATION_RAW_ALLOCATABLE: raw_alloc})
        assert node.raw_allocatable == {"cpu": 8000, "memory": 32 * Gi}

    @pytest.mark.parametrize("value", ["not json", "[1]", json.dumps({"cpu": "banana"})])
    def test_garbled_raw_allocatable_reads_as_absent(self, value: str) -> None:
        """A bad annotation must not stop the node from loading."""
        node = builders.make_node("n", annotations={objects.ANNOTATION_RAW_ALLOCATABLE: value})
        assert node.raw_allocatable is None


def test_pod_conditions_keep_reason_and_transition_time() -> None:
    """PodLifeTime's condition filters read reason and lastTransitionTime; ephemeral statuses kept."""
    raw = builders.make_pod_dict("p")
    raw["status"]["conditions"] = [
        {
            "type": "Initialized",
            "status": "True",
            "reason": "PodCompleted",
            "lastTransitionTime": "2024-05-01T10:00:00Z",
        },
        {"type": "Ready", "status": "False"},
    ]
    raw["status"]["ephemeralContainerStatuses"] = [
        {"name": "debug", "state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}
    ]
    pod = objects.Pod.from_api(raw)
    first, ready = pod.conditions
    assert (first.type, first.status, first.reason) == ("Initialized", "True", "PodCompleted")
    assert first.last_transition_time == objects.parse_time("2024-05-01T10:00:00Z")
    assert (ready.reason, ready.last_transition_time) == ("", None)
    assert (pod.condition("Ready"), pod.condition("PodScheduled")) == ("False", None)
    [debug] = pod.ephemeral_container_statuses
    assert (debug.terminated_reason, debug.terminated_exit_code) == ("OOMKilled", 137)
