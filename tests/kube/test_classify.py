"""Pod classification: Kubernetes QoS, Koordinator priority and QoS (kube.classify)."""

from __future__ import annotations

from typing import Any

import pytest

from kube import classify, objects
from kube.classify import KoordQOS, KubeQOS, PriorityClass
from tests import builders


def _container(
    requests: dict[str, str] | None = None, limits: dict[str, str] | None = None
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "image": "i", "resources": resources}


CPU_MEM = {"cpu": "1", "memory": "1Gi"}


@pytest.mark.parametrize(
    ("containers", "init_containers", "expected"),
    [
        pytest.param(
            [_container(CPU_MEM, CPU_MEM)], [], KubeQOS.GUARANTEED, id="requests-equal-limits"
        ),
        pytest.param(
            [_container(None, CPU_MEM)], [], KubeQOS.GUARANTEED, id="requests-default-to-limits"
        ),
        pytest.param([_container(CPU_MEM)], [], KubeQOS.BURSTABLE, id="requests-only"),
        pytest.param(
            [_container(CPU_MEM, {"cpu": "2", "memory": "1Gi"})],
            [],
            KubeQOS.BURSTABLE,
            id="limit-above-request",
        ),
        pytest.param(
            [_container({"cpu": "1"}, {"cpu": "1"})], [], KubeQOS.BURSTABLE, id="no-memory-limit"
        ),
        pytest.param([_container()], [], KubeQOS.BEST_EFFORT, id="no-resources"),
        pytest.param(
            [_container({"cpu": "0", "memory": "0"})], [], KubeQOS.BEST_EFFORT, id="zero-is-absent"
        ),
        pytest.param(
            [_container({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"})],
            [],
            KubeQOS.BEST_EFFORT,
            id="extended-resources-ignored",
        ),
        pytest.param(
            [_container(CPU_MEM, CPU_MEM)],
            [_container({"cpu": "1"})],
            KubeQOS.BURSTABLE,
            id="init-without-limits",
        ),
        pytest.param(
            [_container(CPU_MEM, CPU_MEM)],
            [_container(CPU_MEM, CPU_MEM)],
            KubeQOS.GUARANTEED,
            id="init-guaranteed-too",
        ),
        pytest.param(
            [_container()],
            [_container({"memory": "1Mi"})],
            KubeQOS.BURSTABLE,
            id="init-request-only",
        ),
    ],
)
def test_kube_qos_is_computed_like_kubelet(
    containers: list[dict[str, Any]], init_containers: list[dict[str, Any]], expected: KubeQOS
) -> None:
    """Kubernetes QoS follows ComputePodQOS over all containers, init included."""
    pod = builders.make_pod("p", containers=containers, init_containers=init_containers)
    assert pod.kube_qos is expected


def test_kube_qos_compares_sums_not_containers() -> None:
    """Requests and limits are summed over containers before comparing (kubelet quirk)."""
    qos = classify.compute_kube_qos(
        [
            ({"cpu": 1000, "memory": 1}, {"cpu": 2000, "memory": 1}),
            ({"cpu": 2000, "memory": 1}, {"cpu": 1000, "memory": 1}),
        ]
    )
    assert qos is KubeQOS.GUARANTEED


def test_pod_level_resources_replace_container_sums() -> None:
    """Pod-level spec.resources decide the class when set (Kubernetes 1.32+)."""
    qos = classify.compute_kube_qos(
        [({}, {})], ({"cpu": 1000, "memory": 1}, {"cpu": 1000, "memory": 1})
    )
    assert qos is KubeQOS.GUARANTEED


def test_status_qos_class_wins_over_spec() -> None:
    """status.qosClass, fixed at admission, is used when the server set it."""
    raw = builders.make_pod_dict("p", qos=KubeQOS.BEST_EFFORT)
    raw["status"]["qosClass"] = "Guaranteed"
    assert classify.kube_qos_of("Guaranteed", KubeQOS.BEST_EFFORT) is KubeQOS.GUARANTEED
    assert objects.Pod.from_api(raw).kube_qos is KubeQOS.GUARANTEED
    assert classify.kube_qos_of("Bogus", KubeQOS.BURSTABLE) is KubeQOS.BURSTABLE


@pytest.mark.parametrize(
    ("labels", "priority", "expected"),
    [
        pytest.param({}, 9000, PriorityClass.PROD, id="prod-low-edge"),
        pytest.param({}, 9999, PriorityClass.PROD, id="prod-high-edge"),
        pytest.param({}, 8999, PriorityClass.NONE, id="between-mid-and-prod"),
        pytest.param({}, 7000, PriorityClass.MID, id="mid"),
        pytest.param({}, 5999, PriorityClass.BATCH, id="batch"),
        pytest.param({}, 3000, PriorityClass.FREE, id="free-low-edge"),
        pytest.param({}, 3999, PriorityClass.FREE, id="free-high-edge"),
        pytest.param({}, 0, PriorityClass.NONE, id="zero"),
        pytest.param({}, 10000, PriorityClass.NONE, id="above-prod"),
        pytest.param({}, None, PriorityClass.NONE, id="no-priority"),
        pytest.param(
            {classify.LABEL_PRIORITY_CLASS: "koord-batch"},
            9500,
            PriorityClass.BATCH,
            id="label-wins",
        ),
        pytest.param(
            {classify.LABEL_PRIORITY_CLASS: "gold"},
            9500,
            PriorityClass.NONE,
            id="unknown-label-is-none",
        ),
    ],
)
def test_priority_class(
    labels: dict[str, str], priority: int | None, expected: PriorityClass
) -> None:
    """Koordinator priority class comes from the label, else from the priority band."""
    assert classify.priority_class_of(labels, priority) is expected


@pytest.mark.parametrize(
    ("labels", "kube_qos", "expected"),
    [
        pytest.param({}, KubeQOS.GUARANTEED, KoordQOS.LSR, id="guaranteed-is-LSR"),
        pytest.param({}, KubeQOS.BURSTABLE, KoordQOS.LS, id="burstable-is-LS"),
        pytest.param({}, KubeQOS.BEST_EFFORT, KoordQOS.BE, id="besteffort-is-BE"),
        pytest.param(
            {classify.LABEL_QOS_CLASS: "LSE"}, KubeQOS.GUARANTEED, KoordQOS.LSE, id="label-LSE"
        ),
        pytest.param(
            {classify.LABEL_QOS_CLASS: "SYSTEM"},
            KubeQOS.BURSTABLE,
            KoordQOS.SYSTEM,
            id="label-SYSTEM",
        ),
        pytest.param(
            {classify.LABEL_QOS_CLASS: "BE"}, KubeQOS.GUARANTEED, KoordQOS.BE, id="label-beats-kube"
        ),
        pytest.param(
            {classify.LABEL_QOS_CLASS: "gold"},
            KubeQOS.BURSTABLE,
            KoordQOS.LS,
            id="unknown-label-falls-back",
        ),
    ],
)
def test_koord_qos(labels: dict[str, str], kube_qos: KubeQOS, expected: KoordQOS) -> None:
    """Koordinator QoS comes from a known label, else from the Kubernetes class."""
    assert classify.koord_qos_of(labels, kube_qos) is expected


def test_enum_values_are_wire_spellings() -> None:
    """Values match what NodeMetric podsMetric carries; NONE is the empty string."""
    assert [p.value for p in PriorityClass] == [
        "koord-prod",
        "koord-mid",
        "koord-batch",
        "koord-free",
        "",
    ]
    assert [q.value for q in KoordQOS] == ["LSE", "LSR", "LS", "BE", "SYSTEM", ""]
    assert [q.value for q in KubeQOS] == ["Guaranteed", "Burstable", "BestEffort"]


def test_builder_koordinator_be_pod_is_kube_besteffort() -> None:
    """A Koordinator BE pod requests batch resources only, so it is BestEffort to Kubernetes."""
    pod = builders.make_pod("be", qos=KoordQOS.BE, cpu="400m", memory="1Gi")
    assert (pod.kube_qos, pod.koord_qos) == (KubeQOS.BEST_EFFORT, KoordQOS.BE)
    assert pod.requests == {builders.BATCH_CPU: 400, builders.BATCH_MEMORY: 2**30}
