"""nodeqos_manager_config_valid reflects every consumer of the ConfigMap (issue #36).

The reconciler loads every key; the Batch controller parses `colocation-config`
again, more strictly. A colocation-config only the Batch controller refuses used
to read as valid, and its first bad load silently meant `enable: false`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid

import pytest
from prometheus_client import CollectorRegistry, Gauge

from kube import informerset, rest
from manager import batchresource, reconcile, telemetry
from tests.manager.test_reconcile_controlplane import CM_NAME
from tests.waiting import eventually

REFUSED = json.dumps({"enable": True, "degradeTimeMinutes": 0})  # batch: must be >= 1
GOOD = json.dumps({"enable": True, "degradeTimeMinutes": 5})


def test_config_validity_is_zero_while_any_consumer_refuses() -> None:
    """One refusing consumer turns the gauge to 0; it reads 1 once all took the config."""
    registry = CollectorRegistry()
    validity = telemetry.ConfigValidity(Gauge("valid", "v", registry=registry))
    validity.report("reconciler", None)
    assert registry.get_sample_value("valid") == 1
    validity.report("batch-controller", "colocation-config: bad")
    validity.report("reconciler", None)
    assert registry.get_sample_value("valid") == 0
    assert validity.problems() == {"batch-controller": "colocation-config: bad"}
    validity.report("batch-controller", None)
    assert registry.get_sample_value("valid") == 1 and validity.problems() == {}


@pytest.mark.controlplane
def test_a_colocation_config_the_batch_controller_refuses_is_invalid(
    kube: rest.Rest, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Reconciler and Batch controller on one shared informer set: a colocation-config
    the reconciler accepts but the Batch controller refuses sets config_valid 0, with a
    log line saying nothing is written; a fixed one sets it back to 1."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    kube.create(path, {"metadata": {"name": CM_NAME}, "data": {"colocation-config": REFUSED}})
    registry = CollectorRegistry()
    metrics = telemetry.Metrics(registry)
    informers = informerset.Informers(kube)
    tag = uuid.uuid4().hex[:8]
    reconciler = reconcile.Reconciler(
        kube,
        metrics,
        None,
        namespace=namespace,
        name=CM_NAME,
        informers=informers,
        node_selector=f"nodeqos-test={tag}",
    )
    batch = batchresource.BatchController(
        kube,
        metrics,
        None,
        namespace=namespace,
        name=CM_NAME,
        informers=informers,
        node_selector=f"nodeqos-test={tag}",
    )
    assert reconciler.configmaps.shared is batch.configmaps.shared  # one watch
    informers.start()
    try:
        eventually(informers.synced, "the shared informers synced")
        with caplog.at_level(logging.ERROR, logger="manager.batchresource"):
            reconciler.sync_config()
            batch.sync_config()
        assert reconciler.problems == ()  # the reconciler alone would say valid
        assert registry.get_sample_value("nodeqos_manager_config_valid") == 0
        assert "no Batch resources are written" in caplog.text
        assert "degradeTimeMinutes" in metrics.config.problems()["batch-controller"]
        assert (
            registry.get_sample_value(
                "nodeqos_manager_config_errors_total", {"key": "colocation-config"}
            )
            == 1
        )

        current = kube.get(f"{path}/{CM_NAME}")
        current["data"] = {"colocation-config": GOOD}
        version = kube.replace(f"{path}/{CM_NAME}", current)["metadata"]["resourceVersion"]
        eventually(
            lambda: (
                (reconciler.configmaps.get(f"{namespace}/{CM_NAME}") or {})
                .get("metadata", {})
                .get("resourceVersion")
                == version
            ),
            "the fixed ConfigMap in the cache",
        )
        reconciler.sync_config()
        batch.sync_config()
        assert registry.get_sample_value("nodeqos_manager_config_valid") == 1
        assert batch.config is not None and batch.config.cluster.degrade_time_minutes == 5
    finally:
        informers.stop()
        with contextlib.suppress(rest.ApiError):
            kube.delete(f"{path}/{CM_NAME}")
