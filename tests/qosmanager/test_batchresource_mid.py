"""BatchResource on Mid pods: koord-mid pods' cgroups from kubernetes.io/mid-cpu / mid-memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cgroups import CgroupVersion, Driver
from metriccache import MetricCache
from qosmanager import QoSMetrics
from qosmanager.plugins.batchresource import BatchResource, rules, targets
from tests.cgroupfs_builder import write_pod_tree
from tests.qosmanager.builders import GI, FakeClock, FakeStates, make_batch_pod, make_node, pod_meta
from tests.qosmanager.test_batchresource import NO_QUOTA, TREES, cpu_files, fake_be_pod, new_handle

MI = 1 << 20
MID_LABEL = {"koordinator.sh/priority-class": "koord-mid"}


def make_mid_pod(name: str, *, by_priority: bool = False, **kwargs: Any) -> dict[str, Any]:
    """A koord-mid LS pod (the label, or `spec.priority` 7500 with `by_priority`) whose batch
    resources in `make_batch_pod`'s arguments are renamed to the mid ones."""
    obj = make_batch_pod(name, **kwargs)
    labels = obj["metadata"]["labels"]
    labels["koordinator.sh/qosClass"] = "LS"
    if by_priority:
        obj["spec"]["priority"] = 7500
    else:
        labels.update(MID_LABEL)
    for container in obj["spec"]["containers"]:
        for section in ("requests", "limits"):
            values = container["resources"][section]
            container["resources"][section] = {
                k.replace("/batch-", "/mid-"): v for k, v in values.items()
            }
    return obj


def _relabelled(obj: dict[str, Any], priority_class: str) -> dict[str, Any]:
    obj["metadata"]["labels"]["koordinator.sh/priority-class"] = priority_class
    return obj


@pytest.mark.parametrize("by_priority", [False, True], ids=["label", "priority-band"])
def test_a_mid_pod_gets_values_from_its_mid_resources(by_priority: bool) -> None:
    """A koord-mid pod (by label or priority band) is set from mid-cpu/mid-memory, as Batch."""
    obj = make_mid_pod("m", by_priority=by_priority, batch_cpu=[("500", "1000")])
    found = targets(pod_meta(obj), NO_QUOTA)
    assert found is not None
    assert found[0][1] == rules.CgroupValues(512, 100000, GI)


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(
            make_batch_pod("m", labels={"koordinator.sh/qosClass": "LS", **MID_LABEL}),
            id="mid-pod-naming-batch-resources",
        ),
        pytest.param(
            _relabelled(make_mid_pod("m"), "koord-prod"),
            id="prod-pod-naming-mid-resources",
        ),
    ],
)
def test_resources_of_another_tier_are_ignored(obj: dict[str, Any]) -> None:
    """A Mid pod is set only from mid-*, a non-Mid, non-BE pod not at all."""
    assert targets(pod_meta(obj), NO_QUOTA) is None


def test_a_be_labelled_pod_stays_batch_whatever_its_priority() -> None:
    """The BE label decides first (Koordinator's hook): batch-* are read, not mid-*."""
    obj = make_batch_pod("b", labels=MID_LABEL, batch_cpu=[("1000", "2000")])
    found = targets(pod_meta(obj), NO_QUOTA)
    assert found is not None and found[0][1].cfs_quota_us == 200000


def test_mid_quota_is_scaled_by_the_normalization_ratio() -> None:
    """On a node with ratio 2 the Mid quota is halved, as the Batch one."""
    obj = make_mid_pod("m", batch_cpu=[("1000", "2000")])
    found = targets(pod_meta(obj), rules.QuotaRule(ratio=2.0))
    assert found is not None and found[0][1].cfs_quota_us == 100000


@pytest.mark.parametrize(("version", "driver"), TREES)
def test_tick_sets_a_mid_pods_cgroups(
    tmp_path: Path,
    version: CgroupVersion,
    driver: Driver,
    cache: MetricCache,
    clock: FakeClock,
    metrics: QoSMetrics,
) -> None:
    """Two containers of a Mid pod: each its own values, the pod their sums, in each version."""
    fake = fake_be_pod("mid", containers=2)
    tree = write_pod_tree(tmp_path, version, driver, [fake])
    obj = make_mid_pod(
        "mid",
        batch_cpu=[("500", "1000"), ("1500", "2000")],
        batch_memory=[(None, "1Gi"), (None, "512Mi")],
    )
    states = FakeStates(node_value=make_node(), pod_list=[pod_meta(obj, driver)])
    plugin = BatchResource(new_handle(tree, metrics, clock))
    plugin.setup(None, cache, states)  # type: ignore[arg-type]
    plugin.tick()
    pod, c0 = tree.pod_dir(fake), tree.container_dir(fake, fake.containers[0])
    if version is CgroupVersion.V1:
        assert cpu_files(tree, pod) == ("2048", "300000", str(GI + 512 * MI))
        assert cpu_files(tree, c0) == ("512", "100000", str(GI))
    else:
        assert cpu_files(tree, pod) == ("79", "300000 100000", str(GI + 512 * MI))
        assert cpu_files(tree, c0) == ("20", "100000 100000", str(GI))
