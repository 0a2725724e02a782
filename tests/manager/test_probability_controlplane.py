"""Probability between 1% and 99% on the real API server: the manager's webhook draws per pod,
the profile's MutatingAdmissionPolicy applies where the draw says so, and with the webhook
gone pods are still created, unmutated."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kube import rest
from manager import colocationprofile, probability
from tests.manager.test_colocationprofile_controlplane import MAP, MAPB, _pod

pytestmark = pytest.mark.controlplane

MWC = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
N = 40


@pytest.fixture
def cleanup(kube: rest.Rest) -> Iterator[list[str]]:
    paths: list[str] = []
    yield paths
    for path in reversed(paths):
        with contextlib.suppress(rest.ApiError):
            kube.delete(path)


def _decided(pod: dict[str, Any], key: str) -> str:
    return str((pod["metadata"].get("annotations") or {}).get(key, ""))


def test_half_of_the_pods_get_a_fifty_percent_profile(kube: rest.Rest, cleanup: list[str]) -> None:
    """50% over 40 pods: applied to 8..32 (binomial bounds), exactly those marked 'apply';
    webhook stopped: pods are still created and unmutated."""
    suffix = uuid.uuid4().hex[:8]
    name = f"half-{suffix}"
    namespace = f"prob-{suffix}"
    kube.create("/api/v1/namespaces", {"metadata": {"name": namespace, "labels": {"prob": suffix}}})
    cleanup.append(f"/api/v1/namespaces/{namespace}")
    spec = {
        "namespaceSelector": {"matchLabels": {"prob": suffix}},
        "selector": {"matchLabels": {"app": "spark"}},
        "qosClass": "BE",
        "probability": "50%",
    }
    profile = colocationprofile.Profile.from_api({"metadata": {"name": name}, "spec": spec})
    server = probability.Server(
        ("127.0.0.1", 0),
        lambda p: profile.percent if p == name else None,
        hosts=["127.0.0.1"],
    )
    server.start()
    try:
        entry = probability.Entry(name, spec["namespaceSelector"], spec["selector"])
        config = probability.configuration(
            [entry], {"url": f"https://127.0.0.1:{server.port}"}, server.certificate.ca_pem
        )
        config["metadata"]["name"] = f"{probability.CONFIGURATION}-{suffix}"
        kube.create(MWC, config)
        cleanup.append(f"{MWC}/{config['metadata']['name']}")
        for item in colocationprofile.render(profile):
            path = MAP if item["kind"] == "MutatingAdmissionPolicy" else MAPB
            kube.create(path, item)
            cleanup.append(f"{path}/{item['metadata']['name']}")
        pods = f"/api/v1/namespaces/{namespace}/pods"
        key = probability.annotation(name)
        deadline = time.monotonic() + 60
        while True:  # both the webhook and the policy take a moment to be in force
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
        print(f"probability 50%: applied to {len(applied)}/{N} pods")
        assert [p["metadata"]["name"] for p in applied] == [p["metadata"]["name"] for p in marked]
        assert all(_decided(p, key) in ("apply", "skip") for p in created)
        assert 8 <= len(applied) <= 32
        for pod in applied:
            assert (
                "kubernetes.io/batch-cpu" in pod["spec"]["containers"][0]["resources"]["requests"]
            )
    finally:
        server.stop()
    outage = kube.create(pods, _pod("outage", {"app": "spark"}))
    assert _decided(outage, key) == ""
    assert "koordinator.sh/qosClass" not in outage["metadata"]["labels"]
    assert outage["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "500m"
