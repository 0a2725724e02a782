"""manager.profilemutation: a profile applied in-process (the webhook path), pure."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from manager import colocationprofile, profilemutation
from manager.profilemutation import Applied


def _profile(name: str = "p", **spec: Any) -> colocationprofile.Profile:
    return colocationprofile.Profile.from_api({"metadata": {"name": name}, "spec": spec})


def _pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "x", "labels": {"app": "spark"}, "annotations": {"note": "hi"}},
        "spec": {
            "nodeSelector": {"zone": "a"},
            "tolerations": [{"key": "old", "operator": "Exists"}],
            "containers": [
                {
                    "name": "c0",
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "1Gi"},
                        "limits": {"cpu": "1", "memory": "2Gi"},
                    },
                },
                {"name": "c1", "resources": {"requests": {"cpu": "1.5"}}},
            ],
        },
    }


EVERYTHING = {
    "qosClass": "BE",
    "koordinatorPriority": 1111,
    "schedulerName": "koord-scheduler",
    "priorityClassName": "koord-batch",
    "labels": {"team": "data"},
    "annotations": {"colocated-by": "nodeqos"},
    "labelKeysMapping": {"app": "koordinator.sh/app", "team": "owner", "gone": "empty"},
    "annotationKeysMapping": {"note": "copied-note"},
    "labelSuffixes": {"owner": "-batch", "absent": "-x"},
    "patch": {
        "metadata": {"labels": {"patched": "yes"}},
        "spec": {
            "nodeSelector": {"pool": "batch"},
            "tolerations": [{"key": "batch", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "c1",
                    "env": [{"name": "MODE", "value": "batch"}],
                    "resources": {"requests": {"cpu": "250m"}},
                }
            ],
        },
    },
}


def test_every_field_in_koordinators_order() -> None:
    """Labels, mappings (a missing key gives ""), suffixes, QoS and priority, the patch merged
    (maps key by key, containers by name, tolerations replaced), then batch-cpu/memory."""
    out = profilemutation.mutate(
        Applied(_profile(**EVERYTHING), priority_value=5500, preemption_policy="Never"), _pod()
    )
    assert out["metadata"]["labels"] == {
        "app": "spark",
        "team": "data",
        "koordinator.sh/app": "spark",
        "owner": "data-batch",
        "empty": "",
        "koordinator.sh/qosClass": "BE",
        "koordinator.sh/priority": "1111",
        "patched": "yes",
    }
    assert out["metadata"]["annotations"] == {
        "note": "hi",
        "colocated-by": "nodeqos",
        "copied-note": "hi",
    }
    spec = out["spec"]
    assert (spec["schedulerName"], spec["priorityClassName"], spec["priority"]) == (
        "koord-scheduler",
        "koord-batch",
        5500,
    )
    assert spec["preemptionPolicy"] == "Never"
    assert spec["nodeSelector"] == {"zone": "a", "pool": "batch"}
    assert [t["key"] for t in spec["tolerations"]] == ["batch"]
    c0, c1 = spec["containers"]
    assert c0["resources"] == {
        "requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "1Gi"},
        "limits": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "2Gi"},
    }
    assert c1["resources"] == {"requests": {"kubernetes.io/batch-cpu": "250"}}
    assert c1["env"] == [{"name": "MODE", "value": "batch"}]


def test_applying_twice_changes_nothing_more() -> None:
    """Both paths for a moment during a switch: the second mutation is a no-op."""
    applied = Applied(_profile(**EVERYTHING), priority_value=5500, preemption_policy="Never")
    once = profilemutation.mutate(applied, _pod())
    assert profilemutation.mutate(applied, once) == once
    assert profilemutation.patch_ops(once, profilemutation.mutate(applied, once)) == []


@pytest.mark.parametrize(
    ("labels", "priority", "names"),
    [
        ({"koordinator.sh/priority-class": "koord-mid"}, None, ("mid-cpu", "mid-memory")),
        ({}, 5100, ("batch-cpu", "batch-memory")),
        ({}, 7100, ("mid-cpu", "mid-memory")),
        ({}, 9100, None),
        ({"koordinator.sh/qosClass": "BE"}, None, ("batch-cpu", "batch-memory")),
        ({"koordinator.sh/qosClass": "LS"}, None, None),
    ],
)
def test_the_pods_priority_class_picks_the_extended_names(
    labels: dict[str, str], priority: int | None, names: tuple[str, str] | None
) -> None:
    """Label first, then the spec.priority band, then BE -> batch; prod/none: untouched."""
    pod = _pod()
    pod["metadata"]["labels"] = labels
    if priority is not None:
        pod["spec"]["priority"] = priority
    out = profilemutation.mutate(Applied(_profile()), pod)
    requests = out["spec"]["containers"][0]["resources"]["requests"]
    if names is None:
        assert requests == {"cpu": "500m", "memory": "1Gi"}
    else:
        cpu, memory = (f"kubernetes.io/{n}" for n in names)
        assert requests == {cpu: "500", memory: "1Gi"}


def test_cpu_rounds_to_the_nearest_millicore_as_the_policy_does() -> None:
    pod = _pod()
    pod["spec"]["containers"][1]["resources"]["requests"]["cpu"] = "0.0015"
    out = profilemutation.mutate(Applied(_profile(qosClass="BE")), pod)
    assert out["spec"]["containers"][1]["resources"]["requests"] == {"kubernetes.io/batch-cpu": "2"}


def test_selectors_and_probability_decide_which_profiles_apply() -> None:
    """namespaceSelector on the Namespace's labels, selector on the pod's; name order;
    0% never; p% applies when the draw 0..99 is at most p."""
    profiles = [
        Applied(_profile("b", labels={"b": "1"}, namespaceSelector={"matchLabels": {"on": "y"}})),
        Applied(_profile("a", labels={"a": "1"}, selector={"matchLabels": {"app": "web"}})),
        Applied(_profile("c", labels={"c": "1"}, probability=30)),
        Applied(_profile("d", labels={"d": "1"}, probability=0)),
    ]
    _, names = profilemutation.apply_all(profiles, _pod(), {"on": "y"}, lambda: 30)
    assert names == ["b", "c"]
    _, names = profilemutation.apply_all(profiles, _pod(), {"on": "n"}, lambda: 31)
    assert names == []


def _apply_ops(pod: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    out = copy.deepcopy(pod)
    for op in ops:
        assert op["op"] == "add"
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target = out
        for part in parts[:-1]:
            target = target[part]
        target[parts[-1]] = op["value"]
    return out


def _review(pod: dict[str, Any], namespace: str = "ns") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u1", "namespace": namespace, "operation": "CREATE", "object": pod},
    }


def test_the_review_answer_patches_the_pod_to_the_mutated_one() -> None:
    """Allowed always; the JSONPatch turns the pod into `mutate`'s result; outcome recorded."""
    applied = [Applied(_profile(**EVERYTHING), priority_value=5500, preemption_policy="Never")]
    outcomes: list[str] = []
    answer = profilemutation.review_response(
        _review(_pod()), applied, lambda _ns: {}, lambda: 0, outcomes.append
    )
    response = answer["response"]
    assert response["allowed"] and response["uid"] == "u1"
    ops = json.loads(base64.b64decode(response["patch"]))
    assert _apply_ops(_pod(), ops) == profilemutation.mutate(applied[0], _pod())
    assert outcomes == ["mutated"]
    again = profilemutation.review_response(
        _review(_apply_ops(_pod(), ops)), applied, lambda _ns: {}, lambda: 0, outcomes.append
    )
    assert "patch" not in again["response"] and outcomes[-1] == "unchanged"


def test_an_unknown_namespace_skips_the_profiles_that_select_namespaces() -> None:
    """Namespace informer not synced (or the Namespace not seen yet): fail open for the
    profiles that need it; the others still apply."""
    applied = [
        Applied(_profile("a", labels={"a": "1"}, namespaceSelector={"matchLabels": {"x": "y"}})),
        Applied(_profile("b", labels={"b": "1"})),
    ]
    outcomes: list[str] = []
    answer = profilemutation.review_response(
        _review(_pod()), applied, lambda _ns: None, lambda: 0, outcomes.append
    )
    ops = json.loads(base64.b64decode(answer["response"]["patch"]))
    labels = _apply_ops(_pod(), ops)["metadata"]["labels"]
    assert labels == {"app": "spark", "b": "1"}
    assert outcomes == ["namespace-unknown", "mutated"]


def test_the_configuration_is_one_fail_open_webhook_for_every_pod() -> None:
    config = profilemutation.configuration({"url": "https://127.0.0.1:9443"}, b"CA")
    (webhook,) = config["webhooks"]
    assert config["metadata"]["name"] == "nodeqos-colocation-profiles"
    assert webhook["clientConfig"]["url"] == "https://127.0.0.1:9443/profiles"
    assert (webhook["failurePolicy"], webhook["timeoutSeconds"]) == ("Ignore", 3)
    assert (webhook["sideEffects"], webhook["reinvocationPolicy"]) == ("None", "Never")
    assert "namespaceSelector" not in webhook and "objectSelector" not in webhook
