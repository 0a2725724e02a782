"""Pod classification: Kubernetes QoS, Koordinator priority class and QoS class.

`kube.objects.Pod.from_api` calls these once per pod so every consumer (the QoS
plugins, the NodeMetric reporter, the descheduler filters) sees the same answer.
Enum values are spelled as they travel on the wire: Koordinator's NodeMetric
`podsMetric[].priority` / `.qos` carry `PriorityClass` and `KoordQOS` values.

Rules (facts, checked against the references):

- `compute_kube_qos` is kubelet's `ComputePodQOS`: only cpu and memory count,
  only positive amounts count, requests and limits are *summed over all
  containers* (init included) before being compared, and a container without
  both a cpu and a memory limit rules out Guaranteed. Requests absent from a
  container default to its limits, as API defaulting does. Pod-level resources
  (`spec.resources`, Kubernetes 1.32+) replace the per-container sums when set.
- `kube_qos_of` prefers `status.qosClass` (the kubelet fixes it at admission and
  never changes it, even across in-place resizes), as Koordinator's
  `GetKubeQosClass` does.
- `priority_class_of`: label `koordinator.sh/priority-class` when present (an
  unknown value means NONE, the label still wins), else the `spec.priority` band.
- `koord_qos_of`: label `koordinator.sh/qosClass` when it names a known class,
  else Guaranteed→LSR, Burstable→LS, BestEffort→BE.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

from kube import quantity

__all__ = [
    "LABEL_PRIORITY_CLASS",
    "LABEL_QOS_CLASS",
    "KoordQOS",
    "KubeQOS",
    "PriorityClass",
    "compute_kube_qos",
    "koord_qos_of",
    "kube_qos_of",
    "priority_class_of",
]

LABEL_PRIORITY_CLASS = "koordinator.sh/priority-class"
LABEL_QOS_CLASS = "koordinator.sh/qosClass"


class KubeQOS(enum.StrEnum):
    """Kubernetes pod QoS class (`status.qosClass`)."""

    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BEST_EFFORT = "BestEffort"


class PriorityClass(enum.StrEnum):
    """Koordinator priority class; NONE is the empty string, as on the wire."""

    PROD = "koord-prod"
    MID = "koord-mid"
    BATCH = "koord-batch"
    FREE = "koord-free"
    NONE = ""


class KoordQOS(enum.StrEnum):
    """Koordinator QoS class; NONE is the empty string, as on the wire."""

    LSE = "LSE"
    LSR = "LSR"
    LS = "LS"
    BE = "BE"
    SYSTEM = "SYSTEM"
    NONE = ""


# Koordinator's default bands (apis/extension/priority.go), inclusive.
_PRIORITY_BANDS = (
    (9000, 9999, PriorityClass.PROD),
    (7000, 7999, PriorityClass.MID),
    (5000, 5999, PriorityClass.BATCH),
    (3000, 3999, PriorityClass.FREE),
)
_KNOWN_PRIORITY = {p.value: p for p in PriorityClass if p is not PriorityClass.NONE}
_KNOWN_QOS = {q.value: q for q in KoordQOS if q is not KoordQOS.NONE}
_KUBE_TO_KOORD = {
    KubeQOS.GUARANTEED: KoordQOS.LSR,
    KubeQOS.BURSTABLE: KoordQOS.LS,
    KubeQOS.BEST_EFFORT: KoordQOS.BE,
}
_QOS_RESOURCES = (quantity.CPU, quantity.MEMORY)

# (requests, limits) of one container, as resource name -> amount.
ContainerResources = tuple[Mapping[str, int], Mapping[str, int]]


def compute_kube_qos(
    containers: Iterable[ContainerResources],
    pod_level: ContainerResources | None = None,
) -> KubeQOS:
    """Kubernetes QoS from (requests, limits) of every container, init ones included.

    `pod_level` is the pod's own `spec.resources` when set. Requests are expected
    to be defaulted from limits already (as `kube.objects` does).
    """
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    if pod_level is not None and (pod_level[0] or pod_level[1]):
        parts: Iterable[ContainerResources] = (pod_level,)
    else:
        parts = containers
    for reqs, lims in parts:
        for name in _QOS_RESOURCES:
            if reqs.get(name, 0) > 0:
                requests[name] = requests.get(name, 0) + reqs[name]
            if lims.get(name, 0) > 0:
                limits[name] = limits.get(name, 0) + lims[name]
        if not all(lims.get(name, 0) > 0 for name in _QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return KubeQOS.BEST_EFFORT
    if guaranteed and requests == limits:
        return KubeQOS.GUARANTEED
    return KubeQOS.BURSTABLE


def kube_qos_of(status_qos_class: str | None, computed: KubeQOS) -> KubeQOS:
    """`status.qosClass` when the server set a valid one, else the computed class."""
    try:
        return KubeQOS(status_qos_class) if status_qos_class else computed
    except ValueError:
        return computed


def priority_class_of(labels: Mapping[str, str], priority: int | None) -> PriorityClass:
    """Koordinator priority class from the label, else from `spec.priority`."""
    if LABEL_PRIORITY_CLASS in labels:
        return _KNOWN_PRIORITY.get(labels[LABEL_PRIORITY_CLASS], PriorityClass.NONE)
    if priority is None:
        return PriorityClass.NONE
    for low, high, cls in _PRIORITY_BANDS:
        if low <= priority <= high:
            return cls
    return PriorityClass.NONE


def koord_qos_of(labels: Mapping[str, str], kube_qos: KubeQOS) -> KoordQOS:
    """Koordinator QoS class from the label, else mapped from the Kubernetes class."""
    explicit = _KNOWN_QOS.get(labels.get(LABEL_QOS_CLASS, ""))
    return explicit if explicit is not None else _KUBE_TO_KOORD[kube_qos]
