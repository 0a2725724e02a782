"""The extender's estimate of Batch and Mid pods: from their batch-*/mid-* resources."""

from __future__ import annotations

from typing import Any

import pytest

from extender import loads
from extender.args import LoadAwareArgs
from tests.builders import make_pod_dict

MI = 1 << 20
ARGS = LoadAwareArgs.from_mapping({}, "args")  # cpu 85 %, memory 70 %


def _pod(
    priority_class: str | None, resources: dict[str, str], qos: str | None = None
) -> dict[str, Any]:
    labels = {"koordinator.sh/priority-class": priority_class} if priority_class else {}
    if qos:
        labels["koordinator.sh/qosClass"] = qos
    obj = make_pod_dict("p", labels=labels, cpu=None, memory=None)
    obj["spec"]["containers"][0]["resources"] = {"requests": resources, "limits": {}}
    return obj


def _estimate(obj: dict[str, Any]) -> tuple[int, ...]:
    found = loads.pod_projector(ARGS)(obj)
    return found.estimate[: len(ARGS.resources)]


@pytest.mark.parametrize(
    ("obj", "cpu", "memory"),
    [
        pytest.param(
            _pod("koord-mid", {"kubernetes.io/mid-cpu": "2000", "kubernetes.io/mid-memory": "1Gi"}),
            1700, int(1024 * MI * 0.7 + 0.5), id="mid-from-mid-resources",
        ),
        pytest.param(
            _pod("koord-batch", {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "100Mi"}),
            850, 70 * MI, id="batch-from-batch-resources",
        ),
        pytest.param(
            _pod(None, {"kubernetes.io/batch-cpu": "1000"}, qos="BE"),
            850, loads.DEFAULT_MEMORY_BYTES, id="be-defaults-to-batch",
        ),
        pytest.param(_pod("koord-batch", {}), 250, loads.DEFAULT_MEMORY_BYTES, id="empty-batch-gets-defaults"),
        pytest.param(_pod("koord-mid", {}), 0, 0, id="empty-mid-gets-zero-as-koordinator"),
        pytest.param(
            _pod("koord-mid", {"cpu": "1", "memory": "1Gi"}), 0, 0, id="mid-ignores-plain-cpu",
        ),
        pytest.param(
            _pod("koord-prod", {"cpu": "1", "kubernetes.io/mid-cpu": "5000"}),
            850, loads.DEFAULT_MEMORY_BYTES, id="prod-from-cpu",
        ),
    ],
)  # fmt: skip
def test_estimate_reads_the_tiers_resources(obj: dict[str, Any], cpu: int, memory: int) -> None:
    """Koordinator's TranslateResourceNameByPriorityClass, then its estimator's defaults."""
    names = ARGS.resources
    estimate = dict(zip(names, _estimate(obj), strict=True))
    assert (estimate["cpu"], estimate["memory"]) == (cpu, memory)


def test_a_free_pod_is_estimated_from_cpu_and_memory() -> None:
    """A koord-free pod keeps cpu/memory (deviation `free-pod-estimate`: Koordinator gives 0)."""
    estimate = dict(zip(ARGS.resources, _estimate(_pod("koord-free", {"cpu": "2"})), strict=True))
    assert estimate["cpu"] == 1700
