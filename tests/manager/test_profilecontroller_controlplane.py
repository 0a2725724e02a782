"""The ClusterColocationProfile controller on the real API server: a profile becomes a
MutatingAdmissionPolicy that mutates matching pods; a deleted profile's policy goes."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid

import pytest
from prometheus_client import CollectorRegistry

from kube import events, rest
from manager import profilecontroller, telemetry
from tests.manager.test_colocationprofile_controlplane import MAP, MAPB, PROFILES, _pod
from tests.manager.test_reconcile_controlplane import eventually

pytestmark = pytest.mark.controlplane


def test_profile_lifecycle_drives_the_policy(kube: rest.Rest) -> None:
    """Create a profile: policy + binding appear and a matching pod gets batch resources;
    a broken profile gets an Event, and is forgotten once deleted; delete the profile:
    both go."""
    suffix = uuid.uuid4().hex[:8]
    namespace = f"pctl-{suffix}"
    kube.create("/api/v1/namespaces", {"metadata": {"name": namespace, "labels": {"pctl": suffix}}})
    registry = CollectorRegistry()
    controller = profilecontroller.ProfileController(
        kube, events.Recorder(kube, "nodeqos-manager"), metrics=telemetry.Metrics(registry)
    )
    stop = threading.Event()
    controller.start()
    loop = threading.Thread(target=controller.run, args=(stop, lambda: True), daemon=True)
    loop.start()
    name = f"batch-{suffix}"
    broken = f"broken-{suffix}"
    policy = f"nodeqos-colocation-{name}"
    pc = f"pctl-{suffix}"
    pc = f"pctl-{suffix}"
    try:
        kube.create(
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": pc},
                "value": 5500,
                # Koordinator's koord-batch may say Never: the pod must get it too, or the
                # Priority admission plugin refuses the pod (a class's policy is not optional).
                "preemptionPolicy": "Never",
            },
        )
        kube.create(
            PROFILES,
            {
                "apiVersion": "config.koordinator.sh/v1alpha1",
                "kind": "ClusterColocationProfile",
                "metadata": {"name": name},
                "spec": {
                    "namespaceSelector": {"matchLabels": {"pctl": suffix}},
                    "qosClass": "BE",
                    "priorityClassName": pc,
                    "labels": {"koordinator.sh/priority-class": "koord-batch"},
                },
            },
        )
        kube.create(
            PROFILES,
            {
                "apiVersion": "config.koordinator.sh/v1alpha1",
                "kind": "ClusterColocationProfile",
                "metadata": {"name": broken},
                "spec": {"qosClass": "BE", "priorityClassName": pc, "probability": "50%"},
            },
        )
        eventually(lambda: _exists(kube, f"{MAP}/{policy}"), "the policy")
        eventually(lambda: _exists(kube, f"{MAPB}/{policy}"), "the binding")
        pods = f"/api/v1/namespaces/{namespace}/pods"
        deadline = time.monotonic() + 60
        while True:  # the API server's policy informer takes a moment
            probe = kube.request("POST", pods, query={"dryRun": "All"}, body=_pod("p", {}))
            requests = probe["spec"]["containers"][0]["resources"]["requests"]
            if "kubernetes.io/batch-cpu" in requests:
                assert probe["spec"]["preemptionPolicy"] == "Never", probe["spec"]
                break
            assert time.monotonic() < deadline, f"pod not mutated within 60 s: {requests}"
            time.sleep(0.5)
        assert "cpu" not in requests
        selector = f"involvedObject.name={broken},reason={profilecontroller.INVALID_REASON}"
        eventually(
            lambda: kube.get("/api/v1/events", fieldSelector=selector)["items"],
            "the invalid-profile Event",
        )
        assert broken in controller.reported
        kube.delete(f"{PROFILES}/{broken}")  # its report is forgotten (bounded memory)
        eventually(lambda: broken not in controller.reported, "the broken profile forgotten")
        kube.delete(f"{PROFILES}/{name}")
        eventually(lambda: not _exists(kube, f"{MAP}/{policy}"), "the policy deleted")
        eventually(lambda: not _exists(kube, f"{MAPB}/{policy}"), "the binding deleted")
        for kind in ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"):
            for verb in ("create", "delete"):  # writes_total counts this controller's writes too
                labels = {"kind": kind, "verb": verb}
                assert registry.get_sample_value("nodeqos_manager_writes_total", labels), labels
    finally:
        stop.set()
        loop.join(10)
        controller.stop()
        for path in (
            f"{PROFILES}/{name}",
            f"{PROFILES}/{broken}",
            f"{MAPB}/{policy}",
            f"{MAP}/{policy}",
            f"/api/v1/namespaces/{namespace}",
            f"/apis/scheduling.k8s.io/v1/priorityclasses/{pc}",
        ):
            with contextlib.suppress(rest.ApiError):
                kube.delete(path)


def _exists(kube: rest.Rest, path: str) -> bool:
    try:
        kube.get(path)
    except rest.ApiError as err:
        assert err.not_found
        return False
    return True
