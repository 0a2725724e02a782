"""The reference projects' test fixtures, as nodeqos objects, and one way to run a case.

Both references build their tables from the same few helpers (descheduler
`test/test_utils.go`, Koordinator `pkg/descheduler/test/test_utils.go`):
`BuildTestPod(name, milliCPU, memoryBytes, node, apply)` and
`BuildTestNode(name, milliCPU, memoryBytes, pods, apply)` plus setters such as
`SetRSOwnerRef` or `SetNodeUnschedulable`. `pod` and `node` here take the same
numbers and the same setters (as Python functions over the API JSON), on top
of `tests.builders`, so a case reads like the row it translates:

    pod("p1", 400, 0, "n1", rs_owner)
    node("n3", 4000, 3000, 10, unschedulable)

Facts kept from the fixtures: pods live in namespace `default`, request the
CPU and memory given (a negative amount requests nothing), have no owner, no
priority and no labels unless a setter adds them; owner references carry a
kind and a name, no UID and no `controller: true` (so rules that need a
controller reference see none); nodes are Ready with allocatable = capacity.
The fixtures leave `status.phase` empty; a pod bound to a node is Running here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from descheduler import usagesources
from descheduler.framework import CycleReport
from kube import objects, quantity, slo
from kube.classify import KubeQOS
from tests import builders
from tests.descheduler import fakes

PodSetter = Callable[[dict[str, Any]], None]
NodeSetter = Callable[[dict[str, Any]], None]
NOW = fakes.NOW
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000  # descheduler utils.SystemCriticalPriority
# No cap in the references' tables: nodeqos's default caps lifted (docs/descheduler.md, "Safe defaults").
NO_CAPS: Mapping[str, int] = {
    "maxNoOfPodsToEvictPerNode": 100_000,
    "maxNoOfPodsToEvictTotal": 100_000,
}


# -- pods ------------------------------------------------------------------------------------


def pod(name: str, cpu: int, memory: int, node: str, *setters: PodSetter) -> objects.Pod:
    """`BuildTestPod`: requests `cpu` millicores and `memory` bytes (negative: none)."""
    raw = builders.make_pod_dict(
        name,
        node=node or None,
        cpu=f"{cpu}m" if cpu >= 0 else None,
        memory=str(memory) if memory >= 0 else None,
        qos=KubeQOS.BURSTABLE,
        owner=None,
        priority=None,
    )
    for setter in setters:
        setter(raw)
    return objects.Pod.from_api(raw)


def _owner(kind: str, name: str = "") -> PodSetter:
    def set_owner(raw: dict[str, Any]) -> None:
        ref = {"kind": kind, "apiVersion": "v1"}
        if name:
            ref["name"] = name
        raw["metadata"]["ownerReferences"] = [ref]

    return set_owner


rs_owner = _owner("ReplicaSet", "replicaset-1")  # SetRSOwnerRef
ss_owner = _owner("StatefulSet", "statefulset-1")  # SetSSOwnerRef
ds_owner = _owner("DaemonSet")  # SetDSOwnerRef
pod_owner = _owner("Pod")  # SetNormalOwnerRef


def owners(*refs: tuple[str, str, str]) -> PodSetter:
    """Owner references (kind, name, uid), as tables that set `OwnerReferences` by hand."""

    def set_owners(raw: dict[str, Any]) -> None:
        raw["metadata"]["ownerReferences"] = [
            {"kind": kind, "apiVersion": "v1", "name": name, "uid": uid} for kind, name, uid in refs
        ]

    return set_owners


def mirror(raw: dict[str, Any]) -> None:
    """`GetMirrorPodAnnotation`."""
    raw["metadata"]["annotations"] = {
        "kubernetes.io/created-by": '{"kind":"SerializedReference"}',
        "kubernetes.io/config.source": "api",
        "kubernetes.io/config.mirror": "mirror",
    }


def local_storage(raw: dict[str, Any]) -> None:
    """A hostPath + emptyDir volume (`SetHostPathEmptyDirVolumeSource`)."""
    raw["spec"]["volumes"] = [{"name": "sample", "hostPath": {"path": "somePath"}, "emptyDir": {}}]


def pvc(raw: dict[str, Any]) -> None:
    raw["spec"]["volumes"] = [{"name": "pvc", "persistentVolumeClaim": {"claimName": "foo"}}]


def critical(raw: dict[str, Any]) -> None:
    """The tables' "critical pod": kube-system, system-critical priority."""
    raw["metadata"]["namespace"] = "kube-system"
    raw["spec"]["priority"] = SYSTEM_CRITICAL_PRIORITY


def priority(value: int) -> PodSetter:
    def set_priority(raw: dict[str, Any]) -> None:
        raw["spec"]["priority"] = value

    return set_priority


def namespace(name: str) -> PodSetter:
    def set_namespace(raw: dict[str, Any]) -> None:
        raw["metadata"]["namespace"] = name

    return set_namespace


def labels(**values: str) -> PodSetter:
    """Pod labels; `koordinator_priority_class="koord-batch"` style keys are spelt out."""

    def set_labels(raw: dict[str, Any]) -> None:
        raw["metadata"].setdefault("labels", {}).update(values)

    return set_labels


def koord_batch(raw: dict[str, Any]) -> None:
    """Label `koordinator.sh/priority-class: koord-batch`."""
    raw["metadata"].setdefault("labels", {})["koordinator.sh/priority-class"] = "koord-batch"


def best_effort(raw: dict[str, Any]) -> None:
    """`MakeBestEffortPod`: no requests, no limits."""
    for container in raw["spec"]["containers"]:
        container["resources"] = {}


def guaranteed(raw: dict[str, Any]) -> None:
    """`MakeGuaranteedPod`: limits equal to requests."""
    for container in raw["spec"]["containers"]:
        requests = container.setdefault("resources", {}).setdefault("requests", {})
        container["resources"]["limits"] = dict(requests)


def pod_extended(name: str, amount: int) -> PodSetter:
    """`SetPodExtendedResourceRequest`."""

    def set_request(raw: dict[str, Any]) -> None:
        resources = raw["spec"]["containers"][0].setdefault("resources", {})
        resources.setdefault("requests", {})[name] = str(amount)

    return set_request


def node_selector(**values: str) -> PodSetter:
    def set_selector(raw: dict[str, Any]) -> None:
        raw["spec"]["nodeSelector"] = dict(values)

    return set_selector


def required_node_affinity(key: str, operator: str, *values: str) -> PodSetter:
    """One requiredDuringScheduling term with one expression."""

    def set_affinity(raw: dict[str, Any]) -> None:
        expression: dict[str, Any] = {"key": key, "operator": operator}
        if values:
            expression["values"] = list(values)
        raw["spec"]["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [expression]}]
                }
            }
        }

    return set_affinity


def spec(**fields: Any) -> PodSetter:
    """Any `spec` fields, raw (tolerations, affinity, topologySpreadConstraints, ...)."""

    def set_spec(raw: dict[str, Any]) -> None:
        raw["spec"].update(fields)

    return set_spec


def status(**fields: Any) -> PodSetter:
    """Any `status` fields, raw (phase, reason, containerStatuses, ...)."""

    def set_status(raw: dict[str, Any]) -> None:
        raw["status"].update(fields)

    return set_status


def created(when: datetime) -> PodSetter:
    def set_created(raw: dict[str, Any]) -> None:
        raw["metadata"]["creationTimestamp"] = objects.format_time(when)
        raw["status"]["startTime"] = objects.format_time(when)

    return set_created


def no_status(raw: dict[str, Any]) -> None:
    """No `status` at all, as `BuildTestPod` leaves it: phase "", no container statuses."""
    raw["status"] = {}


def phase(value: str) -> PodSetter:
    def set_phase(raw: dict[str, Any]) -> None:
        raw["status"]["phase"] = value

    return set_phase


def no_creation(raw: dict[str, Any]) -> None:
    """No `creationTimestamp` (a Go zero time, which the API leaves out)."""
    raw["metadata"].pop("creationTimestamp", None)


def container_state(field: str = "containerStatuses", **state: Any) -> PodSetter:
    """One container status with the given `state` (waiting/terminated/running dicts)."""

    def set_state(raw: dict[str, Any]) -> None:
        raw["status"][field] = [{"name": "c", "state": state}]

    return set_state


def conditions(*values: Mapping[str, Any]) -> PodSetter:
    def set_conditions(raw: dict[str, Any]) -> None:
        raw["status"]["conditions"] = [dict(v) for v in values]

    return set_conditions


def terminating(raw: dict[str, Any]) -> None:
    raw["metadata"]["deletionTimestamp"] = objects.format_time(NOW)


def protected(
    node_name: str, *extra: PodSetter, cpu: int = 400, memory: int = 0
) -> list[objects.Pod]:
    """The tables' usual p6-p8: a DaemonSet pod (plus `extra`), a mirror pod with local
    storage, a critical pod. None may be evicted."""
    return [
        pod("p6", cpu, memory, node_name, ds_owner, *extra),
        pod("p7", cpu, memory, node_name, pod_owner, local_storage, mirror),
        pod("p8", cpu, memory, node_name, pod_owner, critical),
    ]


def rs_pods(
    names: Iterable[str], node_name: str, *extra: PodSetter, cpu: int = 400, memory: int = 0
) -> list[objects.Pod]:
    """ReplicaSet-owned pods of the same size."""
    return [pod(name, cpu, memory, node_name, rs_owner, *extra) for name in names]


def three_nodes(pods1: int = 9, pods: int = 10) -> list[objects.Node]:
    """The tables' usual n1, n2 and unschedulable n3 (4000m, 3000 bytes)."""
    return [
        node("n1", 4000, 3000, pods1),
        node("n2", 4000, 3000, pods),
        node("n3", 4000, 3000, pods, unschedulable),
    ]


# -- nodes -----------------------------------------------------------------------------------


def node(name: str, cpu: int, memory: int, pods: int, *setters: NodeSetter) -> objects.Node:
    """`BuildTestNode`: `cpu` millicores, `memory` bytes and `pods` allocatable, Ready."""
    raw = builders.make_node_dict(name, cpu=f"{cpu}m", memory=str(memory), pods=str(pods))
    for setter in setters:
        setter(raw)
    return objects.Node.from_api(raw)


def unschedulable(raw: dict[str, Any]) -> None:
    """`SetNodeUnschedulable`."""
    raw["spec"]["unschedulable"] = True


def not_ready(raw: dict[str, Any]) -> None:
    raw["status"]["conditions"] = [{"type": "Ready", "status": "False"}]


def node_labels(**values: str) -> NodeSetter:
    def set_labels(raw: dict[str, Any]) -> None:
        raw["metadata"]["labels"].update(values)

    return set_labels


def node_extended(name: str, amount: int) -> NodeSetter:
    """`SetNodeExtendedResource`."""

    def set_extended(raw: dict[str, Any]) -> None:
        for field in ("allocatable", "capacity"):
            raw["status"][field][name] = str(amount)

    return set_extended


def taints(*values: str | Mapping[str, Any]) -> NodeSetter:
    def set_taints(raw: dict[str, Any]) -> None:
        raw["spec"]["taints"] = [builders._taint(t) for t in values]

    return set_taints


# -- NodeMetrics -----------------------------------------------------------------------------


def request_usage(pods: Iterable[objects.Pod]) -> dict[str, dict[str, dict[str, int]]]:
    """Koordinator's `setupNodeMetrics`: each pod reports its requests as its usage."""
    by_node: dict[str, dict[str, dict[str, int]]] = {}
    for p in pods:
        if p.node_name:
            by_node.setdefault(p.node_name, {})[p.key] = dict(p.requests)
    return by_node


def nodemetrics(
    nodes: Sequence[objects.Node],
    usage: Mapping[str, Mapping[str, Mapping[str, int]]],
    *,
    at: datetime = NOW,
) -> list[slo.NodeMetric]:
    """One NodeMetric per node: no system usage, the pods' usage as given, fresh at `at`."""
    found = []
    for n in nodes:
        pods = usage.get(n.name, {})
        memory = sum(u.get(quantity.MEMORY, 0) for u in pods.values())
        found.append(
            builders.make_nodemetric(n.name, node_memory=memory, pods=pods, update_time=at)
        )
    return found


# -- running a case --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Profile:
    """One profile: one plugin (at balance or deschedule) with its args, DefaultEvictor's args,
    and the policy's top-level fields (eviction caps)."""

    balance: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    deschedule: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    evictor: Mapping[str, Any] = dataclasses.field(default_factory=lambda: {"nodeFit": False})
    top: Mapping[str, Any] = dataclasses.field(default_factory=lambda: dict(NO_CAPS))

    def one(self) -> tuple[str, str, Mapping[str, Any]]:
        """(extension point, plugin name, args) of the profile's one plugin."""
        [(point, name, args)] = [
            *(("balance", n, a) for n, a in self.balance.items()),
            *(("deschedule", n, a) for n, a in self.deschedule.items()),
        ]
        return point, name, args

    def policy(self) -> dict[str, Any]:
        point, name, args = self.one()
        return fakes.plugin_policy(name, args, point=point, evictor=self.evictor, **self.top)


_EVICTOR_KEYS = frozenset(
    {"nodeFit", "ignorePvcPods", "evictLocalStoragePods", "evictSystemCriticalPods"}
)


def profile_of(
    point: str, name: str, args: Mapping[str, Any], settings: Mapping[str, Any] = {}
) -> Profile:
    """A row's profile: DefaultEvictor keys of `settings` (nodeFit off unless set) to the
    evictor, the rest (eviction caps) to the policy, caps otherwise lifted."""
    evictor = {"nodeFit": False, **{k: v for k, v in settings.items() if k in _EVICTOR_KEYS}}
    top = {**NO_CAPS, **{k: v for k, v in settings.items() if k not in _EVICTOR_KEYS}}
    plugin = {name: args}
    if point == "balance":
        return Profile(balance=plugin, evictor=evictor, top=top)
    return Profile(deschedule=plugin, evictor=evictor, top=top)


def check(evicted: Sequence[str], expect: Expect) -> None:
    """A row's answer: a count of evictions, or (a tuple) the names of the pods evicted."""
    wanted = expect.wanted
    if isinstance(wanted, tuple):
        assert sorted(evicted) == sorted(wanted), evicted
    else:
        assert len(evicted) == wanted, evicted


def run(
    profile: Profile,
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    metrics: Sequence[slo.NodeMetric] = (),
    *,
    now: datetime = NOW,
    sources: usagesources.Sources | None = None,
) -> CycleReport:
    """One real cycle (dry-run off, the fake eviction backend) over the case's cluster.

    `sources`: the actual-usage readers (metrics-server, Prometheus) the plugin gets.
    """
    point, name, args = profile.one()
    return fakes.run_plugin(
        name,
        args,
        pods,
        point=point,
        nodes=nodes,
        evictor=profile.evictor,
        clock=fakes.FixedClock(now),
        node_metrics=metrics,
        sources=sources,
        **profile.top,
    )


def evictions(
    point: str,
    plugin: str,
    args: Mapping[str, Any],
    nodes: Sequence[objects.Node],
    pods: Sequence[objects.Pod],
    settings: Mapping[str, Any] = {},
    *,
    spare: bool = False,
    metrics: Sequence[slo.NodeMetric] = (),
    now: datetime = NOW,
    sources: usagesources.Sources | None = None,
) -> list[str]:
    """One row replayed, the case runner of every plugin table: the row's profile
    (`profile_of`), one real cycle (`run`) over its nodes (plus `with_spare` when
    `spare`), and the names of the pods it evicted, in order (for `check`)."""
    profile = profile_of(point, plugin, args, settings)
    cluster = with_spare(nodes) if spare else nodes
    report = run(profile, cluster, pods, metrics, now=now, sources=sources)
    return evicted_names(report)


SPARE = node("spare", 1000, 3000, 10, unschedulable)


def with_spare(nodes: Sequence[objects.Node]) -> list[objects.Node]:
    """`nodes` plus an empty spare when there is only one.

    Both runners refuse a cycle on fewer than two ready nodes (upstream's
    `descheduler.go`: "eviction causes service disruption"); the plugins' own
    tests call the plugin directly, so a single-node row gets an empty spare,
    unschedulable so that no pod fits on it (nodeFit answers stay the same).
    """
    return [*nodes, SPARE] if len(nodes) < 2 else list(nodes)


def evicted_names(report: CycleReport) -> list[str]:
    """The evicted pods' names (without namespace), in eviction order."""
    return [key.split("/", 1)[1] for key in report.evicted_pods]


# -- case records ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Expect:
    """A case's outcome: the reference's answer, and nodeqos's when it differs on purpose.

    `deviation` names the row of docs/deviations.md that explains the difference.
    """

    reference: Any
    ours: Any = None
    deviation: str = ""

    def __post_init__(self) -> None:
        if (self.ours is None) != (not self.deviation):
            raise ValueError("a case that differs names its deviation, and only then")

    @property
    def wanted(self) -> Any:
        """What nodeqos must answer."""
        return self.reference if self.ours is None else self.ours

    @property
    def agrees(self) -> bool:
        return self.ours is None


def same(reference: Any) -> Expect:
    return Expect(reference=reference)


def differs(reference: Any, ours: Any, deviation: str) -> Expect:
    return Expect(reference=reference, ours=ours, deviation=deviation)


EXPIRY = timedelta(seconds=180)  # LowNodeLoad's default nodeMetricExpirationSeconds
