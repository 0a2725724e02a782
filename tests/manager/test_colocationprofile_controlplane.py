"""A ClusterColocationProfile rendered as a MutatingAdmissionPolicy, applied by the real API server."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kube import quantity, rest
from manager import colocationprofile

pytestmark = pytest.mark.controlplane

MAP = "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies"
MAPB = "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings"
PCS = "/apis/scheduling.k8s.io/v1/priorityclasses"
PROFILES = "/apis/config.koordinator.sh/v1alpha1/clustercolocationprofiles"


def _pod(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "containers": [
                {
                    "name": "c0",
                    "image": "busybox",
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "1Gi"},
                        "limits": {"cpu": "1", "memory": "2Gi"},
                    },
                },
                {"name": "c1", "image": "busybox", "resources": {"requests": {"cpu": "1.5"}}},
            ]
        },
    }


@pytest.fixture
def cluster_objects(kube: rest.Rest) -> Iterator[list[str]]:
    """Paths of cluster-scoped objects to delete after the test."""
    paths: list[str] = []
    yield paths
    for path in reversed(paths):
        with contextlib.suppress(rest.ApiError):
            kube.delete(path)


def test_profile_mutates_matching_pods_at_creation(
    kube: rest.Rest, cluster_objects: list[str]
) -> None:
    """Matching pod: labels, annotation, priority, scheduler, batch-cpu/memory; others untouched."""
    suffix = uuid.uuid4().hex[:8]
    namespace = f"coloc-{suffix}"
    kube.create(
        "/api/v1/namespaces", {"metadata": {"name": namespace, "labels": {"colocation": "on"}}}
    )
    cluster_objects.append(f"/api/v1/namespaces/{namespace}")
    pc = f"koord-batch-{suffix}"
    kube.create(
        PCS,
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": pc},
            "value": 5500,
            # Never, not the default: the Priority admission plugin refuses a pod whose
            # preemptionPolicy differs from its class's, so the policy must write it too.
            "preemptionPolicy": "Never",
        },
    )
    cluster_objects.append(f"{PCS}/{pc}")
    body = {
        "apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile",
        "metadata": {"name": f"spark-{suffix}"},
        "spec": {
            "namespaceSelector": {"matchLabels": {"colocation": "on"}},
            "selector": {"matchLabels": {"app": "spark"}},
            "qosClass": "BE",
            "priorityClassName": pc,
            "koordinatorPriority": 1111,
            "schedulerName": "koord-scheduler",
            "labels": {"team": "data"},
            "annotations": {"colocated-by": "nodeqos"},
            "probability": "100%",
        },
    }
    stored = kube.create(PROFILES, body)  # the CRD accepts Koordinator's profile
    cluster_objects.append(f"{PROFILES}/{stored['metadata']['name']}")
    policy, binding = colocationprofile.render(
        colocationprofile.Profile.from_api(stored), priority_value=5500, preemption_policy="Never"
    )
    kube.create(MAP, policy)
    cluster_objects.append(f"{MAP}/{policy['metadata']['name']}")
    kube.create(MAPB, binding)
    cluster_objects.append(f"{MAPB}/{binding['metadata']['name']}")

    pods = f"/api/v1/namespaces/{namespace}/pods"
    deadline = time.monotonic() + 60
    while True:  # the policy takes effect once the API server's policy informer has it
        probe = kube.request(
            "POST", pods, query={"dryRun": "All"}, body=_pod("probe", {"app": "spark"})
        )
        if (probe["metadata"].get("labels") or {}).get("koordinator.sh/qosClass") == "BE":
            break
        assert time.monotonic() < deadline, f"policy not applied within 60 s: {probe['metadata']}"
        time.sleep(0.5)

    pod = kube.create(pods, _pod("spark", {"app": "spark"}))
    labels = pod["metadata"]["labels"]
    assert labels["koordinator.sh/qosClass"] == "BE"
    assert labels["koordinator.sh/priority"] == "1111"
    assert labels["team"] == "data" and labels["app"] == "spark"
    assert pod["metadata"]["annotations"]["colocated-by"] == "nodeqos"
    assert (pod["spec"]["priorityClassName"], pod["spec"]["priority"]) == (pc, 5500)
    assert pod["spec"]["preemptionPolicy"] == "Never"
    assert pod["spec"]["schedulerName"] == "koord-scheduler"
    c0, c1 = (c["resources"] for c in pod["spec"]["containers"])
    as_ints = {
        section: {k: quantity.quantity_value(v) for k, v in c0[section].items()}
        for section in ("requests", "limits")
    }
    assert as_ints == {
        "requests": {"kubernetes.io/batch-cpu": 500, "kubernetes.io/batch-memory": 1 << 30},
        "limits": {"kubernetes.io/batch-cpu": 1000, "kubernetes.io/batch-memory": 2 << 30},
    }
    assert {k: quantity.quantity_value(v) for k, v in c1["requests"].items()} == {
        "kubernetes.io/batch-cpu": 1500
    }
    assert pod["status"].get("qosClass") in (None, "BestEffort")

    other = kube.create(pods, _pod("web", {"app": "web"}))
    assert "koordinator.sh/qosClass" not in (other["metadata"].get("labels") or {})
    assert other["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "500m",
        "memory": "1Gi",
    }


def _install(kube: rest.Rest, cleanup: list[str], spec: dict[str, Any]) -> str:
    """Render a profile with `spec` into its policy + binding on the API server; a namespace
    the binding selects; returns the namespace's pods path."""
    suffix = uuid.uuid4().hex[:8]
    namespace = f"cmap-{suffix}"
    kube.create("/api/v1/namespaces", {"metadata": {"name": namespace, "labels": {"cmap": suffix}}})
    cleanup.append(f"/api/v1/namespaces/{namespace}")
    body = {
        "metadata": {"name": f"map-{suffix}"},
        "spec": {"namespaceSelector": {"matchLabels": {"cmap": suffix}}, **spec},
    }
    policy, binding = colocationprofile.render(colocationprofile.Profile.from_api(body))
    kube.create(MAP, policy)
    cleanup.append(f"{MAP}/{policy['metadata']['name']}")
    kube.create(MAPB, binding)
    cleanup.append(f"{MAPB}/{binding['metadata']['name']}")
    return f"/api/v1/namespaces/{namespace}/pods"


def _mutated(kube: rest.Rest, pods: str, pod: dict[str, Any], label: str) -> dict[str, Any]:
    """Dry-run `pod` until the policy is in force (the pod comes back with `label`)."""
    deadline = time.monotonic() + 60
    while True:
        probe = kube.request("POST", pods, query={"dryRun": "All"}, body=pod)
        if label in (probe["metadata"].get("labels") or {}):
            return probe
        assert time.monotonic() < deadline, f"policy not applied within 60 s: {probe['metadata']}"
        time.sleep(0.5)


def test_key_mappings_and_suffixes_follow_koordinator(
    kube: rest.Rest, cluster_objects: list[str]
) -> None:
    """Mapped keys copy the value (profile labels first, "" if missing); suffixes append."""
    pods = _install(
        kube,
        cluster_objects,
        {
            "labels": {"team": "data"},
            "labelKeysMapping": {"app": "koordinator.sh/app", "team": "owner", "gone": "empty"},
            "annotationKeysMapping": {"note": "copied-note"},
            "labelSuffixes": {"owner": "-batch", "absent": "-x"},
        },
    )
    pod = _pod("m", {"app": "spark"})
    pod["metadata"]["annotations"] = {"note": "hello"}
    got = _mutated(kube, pods, pod, "owner")["metadata"]
    labels = got["labels"]
    assert labels["koordinator.sh/app"] == "spark"
    assert labels["owner"] == "data-batch"  # mapped from the profile's label, then suffixed
    assert labels["empty"] == ""  # Koordinator: pod.Labels[new] = pod.Labels[old]
    assert "absent" not in labels
    assert got["annotations"]["copied-note"] == "hello"


def test_patch_is_applied_as_a_strategic_merge_would(
    kube: rest.Rest, cluster_objects: list[str]
) -> None:
    """Labels and nodeSelector merge, a container merges by name (env, requests), tolerations
    are replaced; then a batch pod's patched cpu becomes batch-cpu."""
    toleration = {"key": "batch", "operator": "Exists", "effect": "NoSchedule"}
    pods = _install(
        kube,
        cluster_objects,
        {
            "qosClass": "BE",
            "patch": {
                "metadata": {"labels": {"patched": "yes"}},
                "spec": {
                    "nodeSelector": {"pool": "batch"},
                    "tolerations": [toleration],
                    "containers": [
                        {
                            "name": "c1",
                            "env": [{"name": "MODE", "value": "batch"}],
                            "resources": {"requests": {"cpu": "250m"}},
                        }
                    ],
                },
            },
        },
    )
    pod = _pod("p", {"app": "x"})
    pod["spec"]["nodeSelector"] = {"zone": "a"}
    pod["spec"]["tolerations"] = [{"key": "old", "operator": "Exists"}]
    got = _mutated(kube, pods, pod, "patched")
    spec = got["spec"]
    assert spec["nodeSelector"] == {"zone": "a", "pool": "batch"}
    keys = [t["key"] for t in spec["tolerations"]]  # DefaultTolerationSeconds adds its own
    assert spec["tolerations"][0] == toleration and "old" not in keys
    c0, c1 = spec["containers"]
    assert c1["env"] == [{"name": "MODE", "value": "batch"}]
    assert quantity.quantity_value(c1["resources"]["requests"]["kubernetes.io/batch-cpu"]) == 250
    assert quantity.quantity_value(c0["resources"]["requests"]["kubernetes.io/batch-cpu"]) == 500


def test_a_profile_mapping_to_koord_mid_rewrites_cpu_and_memory_to_mid(
    kube: rest.Rest, cluster_objects: list[str]
) -> None:
    """A profile that makes pods koord-mid (label, as Koordinator's webhook reads it) turns
    every cpu/memory request and limit into kubernetes.io/mid-cpu (millicores) and mid-memory,
    as Koordinator's webhook does; the pod's own cpu/memory keys are gone."""
    pods = _install(
        kube,
        cluster_objects,
        {"qosClass": "LS", "labels": {"koordinator.sh/priority-class": "koord-mid"}},
    )
    _mutated(kube, pods, _pod("probe", {"app": "x"}), "koordinator.sh/qosClass")
    pod = kube.create(pods, _pod("mid", {"app": "x"}))
    c0, c1 = (c["resources"] for c in pod["spec"]["containers"])
    as_ints = {
        section: {k: quantity.quantity_value(v) for k, v in c0[section].items()}
        for section in ("requests", "limits")
    }
    assert as_ints == {
        "requests": {"kubernetes.io/mid-cpu": 500, "kubernetes.io/mid-memory": 1 << 30},
        "limits": {"kubernetes.io/mid-cpu": 1000, "kubernetes.io/mid-memory": 2 << 30},
    }
    assert {k: quantity.quantity_value(v) for k, v in c1["requests"].items()} == {
        "kubernetes.io/mid-cpu": 1500
    }
