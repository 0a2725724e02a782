"""`prodReclaimableMetric`: what the Prod pods requested and will not use at their peak.

Pure arithmetic over the predictor's percentiles (`agent.predictor` supplies
them) and the pods' requests; the NodeMetric reporter writes the result as
`status.prodReclaimableMetric` and `status.prodPeakMetric`. The rules are
Koordinator's koordlet (`pkg/koordlet/prediction/peak_predictor.go`, the
`ProdReclaimablePredictor`), which takes the smaller of two estimates:

- **per pod** (`podReclaimablePredictor`): for each Prod pod (priority class
  Prod, or none), peak = p95 CPU and p98 memory of its own histograms x (1 +
  margin); reclaimable += request - peak where positive. A pod younger than
  the cold start, or without a prediction, reclaims nothing and counts its
  request as its peak; a terminating or finished pod counts for nothing.
  Result: min(allocatable - Σ peaks (floored at 0), Σ reclaimable).
- **per priority class** (`priorityReclaimablePredictor`): peak = (p95 CPU and
  p98 memory of the system part + of the Prod class + of the no-class
  class, each class's histogram fed with its pods' summed usage) x (1 +
  margin); reclaimable = max(Σ requests of the running Prod pods - peak, 0),
  at most allocatable - peak. While the system or a class item has no
  prediction (its cold start), koordlet reports nothing (an error); nodeqos
  reports 0 reclaimable and the per-pod peak (docs/deviations.md,
  `prediction-cold-start`).

The node's predicted Prod peak is the larger of the two peaks. Scaling by the
margin truncates to whole millicores and bytes, as Koordinator's
`MultiplyMilliQuant` / `MultiplyQuant` do.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kube import classify, quantity

__all__ = ["PRODUCTIVE", "PodInput", "Prediction", "Reclaimable", "prod_reclaimable"]

# Priority classes whose unused requests Mid may take (isPriorityClassReclaimableForProd).
PRODUCTIVE = (classify.PriorityClass.PROD, classify.PriorityClass.NONE)


@dataclass(frozen=True, slots=True)
class Prediction:
    """A predicted peak before the margin: p95 CPU in millicores, p98 memory in bytes."""

    cpu_milli: int
    memory: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PodInput:
    """What the formula needs of a pod on the node."""

    uid: str
    priority: classify.PriorityClass
    cpu_request: int  # millicores
    memory_request: int  # bytes
    age: float = math.inf  # seconds since creation
    terminating: bool = False  # deletionTimestamp set, or Succeeded / Failed


@dataclass(frozen=True, slots=True)
class Reclaimable:
    """`prodReclaimableMetric` and `prodPeakMetric` (cpu millicores, memory bytes)."""

    reclaimable: quantity.Resources
    peak: quantity.Resources
    warm: bool = True  # False: a node item is in its cold start, nothing is reclaimed
    # the two estimates and their peaks, for explanations and the conformance suite
    by_pod: quantity.Resources = quantity.EMPTY
    by_class: quantity.Resources = quantity.EMPTY
    pod_peak: quantity.Resources = quantity.EMPTY
    class_peak: quantity.Resources = quantity.EMPTY


def _res(cpu: int, memory: int) -> quantity.Resources:
    return quantity.Resources({quantity.CPU: cpu, quantity.MEMORY: memory})


def _scaled(p: Prediction, ratio: float) -> tuple[int, int]:
    return int(p.cpu_milli * ratio), int(p.memory * ratio)


@dataclass(frozen=True, slots=True)
class _PerPod:
    """The per-pod estimate's sums over the Prod pods (cpu millicores, memory bytes)."""

    peak: tuple[int, int]  # unReclaimable: the predicted pods' peaks
    cold: tuple[int, int]  # unpredicted: requests of pods without a usable prediction
    reclaimable: tuple[int, int]  # the predicted pods' requests above their peaks
    requests: tuple[int, int]  # the per-class estimate's requests


def _per_pod(
    pods: Iterable[PodInput],
    pod_predictions: Mapping[str, Prediction],
    ratio: float,
    *,
    cold_start: float,
) -> _PerPod:
    """One pass over the pods: Prod pods only, a cold or unpredicted pod counts by its request."""
    peak_cpu = peak_mem = 0
    cold_cpu = cold_mem = 0
    pod_cpu = pod_mem = 0
    request_cpu = request_mem = 0
    for pod in pods:
        if pod.priority not in PRODUCTIVE:
            continue
        if pod.age <= cold_start:
            cold_cpu += pod.cpu_request
            cold_mem += pod.memory_request
            request_cpu += 0 if pod.terminating else pod.cpu_request
            request_mem += 0 if pod.terminating else pod.memory_request
            continue
        if pod.terminating:
            continue
        found = pod_predictions.get(pod.uid)
        if found is None:
            # koordlet's minPredictor stops at the per-pod predictor's error, so
            # the pod's request is not added to the per-class estimate either.
            cold_cpu += pod.cpu_request
            cold_mem += pod.memory_request
            continue
        request_cpu += pod.cpu_request
        request_mem += pod.memory_request
        cpu, mem = _scaled(found, ratio)
        peak_cpu += cpu
        peak_mem += mem
        pod_cpu += max(0, pod.cpu_request - cpu)
        pod_mem += max(0, pod.memory_request - mem)
    return _PerPod(
        peak=(peak_cpu, peak_mem),
        cold=(cold_cpu, cold_mem),
        reclaimable=(pod_cpu, pod_mem),
        requests=(request_cpu, request_mem),
    )


def prod_reclaimable(
    pods: Iterable[PodInput],
    pod_predictions: Mapping[str, Prediction],
    class_predictions: Mapping[classify.PriorityClass, Prediction],
    system: Prediction | None,
    allocatable: quantity.Resources,
    *,
    cold_start: float,
    margin_percent: int,
) -> Reclaimable:
    """Koordinator's Prod reclaimable and peak; nothing reclaimed while a node item is cold.

    `pod_predictions` holds the pods (by UID) whose histograms are out of their
    cold start; `class_predictions` the Prod and no-class items.
    """
    ratio = (100 + margin_percent) / 100
    alloc_cpu = allocatable.get(quantity.CPU, 0)
    alloc_mem = allocatable.get(quantity.MEMORY, 0)
    per_pod = _per_pod(pods, pod_predictions, ratio, cold_start=cold_start)
    by_pod = (
        min(max(0, alloc_cpu - per_pod.peak[0]), per_pod.reclaimable[0]),
        min(max(0, alloc_mem - per_pod.peak[1]), per_pod.reclaimable[1]),
    )
    pod_peak = (per_pod.peak[0] + per_pod.cold[0], per_pod.peak[1] + per_pod.cold[1])
    request_cpu, request_mem = per_pod.requests

    # per priority class
    if system is None or any(c not in class_predictions for c in PRODUCTIVE):
        return Reclaimable(
            _res(0, 0), _res(*pod_peak), False, _res(*by_pod), quantity.EMPTY, _res(*pod_peak)
        )
    items = [system, *(class_predictions[c] for c in PRODUCTIVE)]
    class_cpu, class_mem = _scaled(
        Prediction(sum(p.cpu_milli for p in items), sum(p.memory for p in items)), ratio
    )
    by_class = (
        min(max(0, alloc_cpu - class_cpu), max(0, request_cpu - class_cpu)),
        min(max(0, alloc_mem - class_mem), max(0, request_mem - class_mem)),
    )
    return Reclaimable(
        reclaimable=_res(min(by_pod[0], by_class[0]), min(by_pod[1], by_class[1])),
        peak=_res(max(pod_peak[0], class_cpu), max(pod_peak[1], class_mem)),
        by_pod=_res(*by_pod),
        by_class=_res(*by_class),
        pod_peak=_res(*pod_peak),
        class_peak=_res(class_cpu, class_mem),
    )
