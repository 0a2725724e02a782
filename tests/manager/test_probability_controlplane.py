"""Probability between 1% and 99% on the real API server: the profile controller keeps the
policy and the webhook configuration, the manager's webhook draws per pod, the policy
applies where the draw says so, and with the webhook gone pods are still created, unmutated."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kube import events, rest
from manager import daemon, probability, profilecontroller
from testbed import controlplane
from tests.manager.test_colocationprofile_controlplane import PROFILES, _pod
from tests.manager.test_reconcile_controlplane import eventually

pytestmark = pytest.mark.controlplane

N = 40


def _decided(pod: dict[str, Any], key: str) -> str:
    return str((pod["metadata"].get("annotations") or {}).get(key, ""))


def test_half_of_the_pods_get_a_fifty_percent_profile(kube: rest.Rest, tmp_path: Path) -> None:
    """50% over 40 pods: applied to 8..32 (binomial bounds), exactly those marked 'apply';
    webhook stopped: pods are still created and unmutated; profile gone: configuration gone."""
    suffix = uuid.uuid4().hex[:8]
    name = f"half-{suffix}"
    namespace = f"prob-{suffix}"
    kube.create("/api/v1/namespaces", {"metadata": {"name": namespace, "labels": {"prob": suffix}}})
    certificate = probability.make_certificate(tmp_path, ["127.0.0.1"])
    controller: profilecontroller.ProfileController | None = None
    server = probability.Server(
        ("127.0.0.1", 0),
        lambda p: None if controller is None else controller.percent(p),
        certificate,
    )
    webhook = profilecontroller.Webhook(
        {"url": f"https://127.0.0.1:{server.port}"}, certificate.ca_pem
    )
    controller = profilecontroller.ProfileController(
        kube, events.Recorder(kube, "nodeqos-manager"), webhook=webhook
    )
    config = profilecontroller.WEBHOOKS.path(probability.CONFIGURATION)
    stop = threading.Event()
    server.start()
    controller.start()
    loop = threading.Thread(target=controller.run, args=(stop, lambda: True), daemon=True)
    loop.start()
    pods = f"/api/v1/namespaces/{namespace}/pods"
    key = probability.annotation(name)
    try:
        kube.create(
            PROFILES,
            {
                "apiVersion": "config.koordinator.sh/v1alpha1",
                "kind": "ClusterColocationProfile",
                "metadata": {"name": name},
                "spec": {
                    "namespaceSelector": {"matchLabels": {"prob": suffix}},
                    "selector": {"matchLabels": {"app": "spark"}},
                    "qosClass": "BE",
                    "priorityClassName": "",
                    "probability": "50%",
                },
            },
        )
        deadline = time.monotonic() + 60
        while True:  # the webhook and the policy each take a moment to be in force
            probe = kube.request(
                "POST", pods, query={"dryRun": "All"}, body=_pod("probe", {"app": "spark"})
            )
            labels = probe["metadata"].get("labels") or {}
            if _decided(probe, key) == "apply" and "koordinator.sh/qosClass" in labels:
                break
            assert time.monotonic() < deadline, f"not in force within 60 s: {probe['metadata']}"
            time.sleep(0.5)
        created = [kube.create(pods, _pod(f"p{i}", {"app": "spark"})) for i in range(N)]
        applied = [p for p in created if "koordinator.sh/qosClass" in p["metadata"]["labels"]]
        marked = [p for p in created if _decided(p, key) == "apply"]
        # a webhook call past its 3 s timeout (a loaded machine) leaves a pod undecided and
        # unmutated, as designed; the draws that were made must still be about half
        undecided = [p for p in created if _decided(p, key) not in ("apply", "skip")]
        print(f"probability 50%: applied to {len(applied)}/{N} pods, {len(undecided)} undecided")
        assert [p["metadata"]["name"] for p in applied] == [p["metadata"]["name"] for p in marked]
        assert all(_decided(p, key) == "" for p in undecided)
        assert len(undecided) <= N // 4
        assert 8 <= len(applied) <= 32
        for pod in applied:
            assert (
                "kubernetes.io/batch-cpu" in pod["spec"]["containers"][0]["resources"]["requests"]
            )
        other = kube.create(pods, _pod("web", {"app": "web"}))  # outside the selector
        assert _decided(other, key) == ""
        server.stop()  # the manager is gone: pods are still created, the profile not applied
        outage = kube.create(pods, _pod("outage", {"app": "spark"}))
        assert _decided(outage, key) == ""
        assert "koordinator.sh/qosClass" not in outage["metadata"]["labels"]
        assert outage["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "500m"
        kube.delete(f"{PROFILES}/{name}")
        eventually(lambda: not _exists(kube, config), "the webhook configuration deleted")
    finally:
        stop.set()
        loop.join(10)
        controller.stop()
        with contextlib.suppress(Exception):
            server.stop()
        for path in (f"{PROFILES}/{name}", config, f"/api/v1/namespaces/{namespace}"):
            with contextlib.suppress(rest.ApiError):
                kube.delete(path)


def _exists(kube: rest.Rest, path: str) -> bool:
    try:
        kube.get(path)
    except rest.ApiError as err:
        assert err.not_found
        return False
    return True


def test_the_manager_daemon_serves_the_draw(kube: rest.Rest) -> None:
    """nodeqos-manager with --webhook-addr/--webhook-url: its Secret holds the certificate,
    and a pod of a 50% profile comes back with the daemon's decision."""
    suffix = uuid.uuid4().hex[:8]
    namespace = f"probd-{suffix}"
    name = f"daemon-{suffix}"
    kube.create(
        "/api/v1/namespaces", {"metadata": {"name": namespace, "labels": {"probd": suffix}}}
    )
    port = controlplane.free_port()
    options = daemon.Options(
        config_namespace=namespace,
        lease_namespace=namespace,
        leader_elect=False,
        metrics_addr="127.0.0.1:0",
        node_selector=f"nodeqos-test=none-{suffix}",
        manage_nodemetrics=False,
        webhook_addr=f"127.0.0.1:{port}",
        webhook_url=f"https://127.0.0.1:{port}",
    )
    running = daemon.build(options, CollectorRegistry(), client=kube)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    key = probability.annotation(name)
    try:
        assert kube.get(f"/api/v1/namespaces/{namespace}/secrets/{probability.SECRET}")["data"]
        kube.create(
            PROFILES,
            {
                "apiVersion": "config.koordinator.sh/v1alpha1",
                "kind": "ClusterColocationProfile",
                "metadata": {"name": name},
                "spec": {
                    "namespaceSelector": {"matchLabels": {"probd": suffix}},
                    "qosClass": "BE",
                    "priorityClassName": "",
                    "probability": 50,
                },
            },
        )
        pods = f"/api/v1/namespaces/{namespace}/pods"

        def decided() -> str:
            probe = kube.request("POST", pods, query={"dryRun": "All"}, body=_pod("p", {}))
            return _decided(probe, key)

        eventually(lambda: decided() in ("apply", "skip"), "the daemon's webhook to decide")
        drawn = sum(
            running.registry.get_sample_value(
                "nodeqos_manager_probability_draws_total", {"decision": d}
            )
            or 0
            for d in ("apply", "skip")
        )
        assert drawn >= 1
    finally:
        running.stop()
        thread.join(30)
        for path in (
            f"{PROFILES}/{name}",
            profilecontroller.BINDINGS.path(f"nodeqos-colocation-{name}"),
            profilecontroller.POLICIES.path(f"nodeqos-colocation-{name}"),
            profilecontroller.WEBHOOKS.path(probability.CONFIGURATION),
            f"/api/v1/namespaces/{namespace}",
        ):
            with contextlib.suppress(rest.ApiError):
                kube.delete(path)
