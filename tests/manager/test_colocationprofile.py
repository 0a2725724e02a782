"""manager.colocationprofile: what a profile renders to, and what it refuses."""

from __future__ import annotations

from typing import Any

import pytest

from manager.colocationprofile import Profile, ProfileError, render


def profile(**spec: Any) -> Profile:
    return Profile.from_api(
        {"metadata": {"name": "p"}, "spec": {"qosClass": "BE", "priorityClassName": "", **spec}}
    )


def test_selectors_go_to_the_binding() -> None:
    """namespaceSelector and selector become the binding's matchResources; CREATE of pods only."""
    policy, binding = render(
        profile(
            namespaceSelector={"matchLabels": {"a": "b"}}, selector={"matchLabels": {"app": "x"}}
        )
    )
    assert binding["spec"] == {
        "policyName": "nodeqos-colocation-p",
        "matchResources": {
            "namespaceSelector": {"matchLabels": {"a": "b"}},
            "objectSelector": {"matchLabels": {"app": "x"}},
        },
    }
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rules == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
    ]
    assert policy["spec"]["failurePolicy"] == "Ignore"


def test_priority_value_is_resolved_at_render_time() -> None:
    """CEL cannot read a PriorityClass: the caller's value is written beside the name."""
    policy, _ = render(profile(priorityClassName="koord-batch"), priority_value=5500)
    expression = _expressions(policy)
    assert 'priorityClassName: "koord-batch"' in expression and "priority: 5500" in expression


def test_preemption_policy_is_written_beside_the_priority() -> None:
    """The class's preemptionPolicy is written too (the Priority plugin refuses a mismatch)."""
    policy, _ = render(
        profile(priorityClassName="koord-batch"), priority_value=5000, preemption_policy="Never"
    )
    expression = policy["spec"]["mutations"][0]["applyConfiguration"]["expression"]
    assert 'preemptionPolicy: "Never"' in expression
    policy, _ = render(profile(priorityClassName="koord-batch"), priority_value=5000)
    assert (
        "preemptionPolicy" not in policy["spec"]["mutations"][0]["applyConfiguration"]["expression"]
    )


@pytest.mark.parametrize("probability", [None, 100, "100%"])
def test_full_probability_renders(probability: Any) -> None:
    """Unset or 100% probability: the profile applies to every matching pod."""
    assert len(render(profile(probability=probability))) == 2


@pytest.mark.parametrize("probability", [0, "0%"])
def test_zero_probability_renders_nothing(probability: Any) -> None:
    """Probability 0: the profile never applies, so no policy at all."""
    assert render(profile(probability=probability)) == []


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param({"probability": "x"}, "spec.probability", id="bad-probability"),
        pytest.param({"patch": {"status": {"phase": "x"}}}, "spec.patch.status", id="patch-status"),
        pytest.param(
            {"patch": {"spec": {"affinity": {"nodeAffinity": {}}}}},
            "spec.patch.spec.affinity",
            id="patch-unmapped-struct",
        ),
        pytest.param(
            {"patch": {"metadata": {"labels": {"a": None}}}},
            "spec.patch.metadata.labels.a",
            id="patch-delete",
        ),
        pytest.param(
            {"patch": {"spec": {"containers": [{"image": "x"}]}}},
            r"spec.patch.spec.containers\[0\]",
            id="patch-no-merge-key",
        ),
        pytest.param(
            {"patch": {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}},
            r"spec.patch.spec.containers\[0\].\$patch",
            id="patch-directive",
        ),
        pytest.param({"labelSuffixes": {"a": 1}}, "spec.labelSuffixes", id="label-suffixes-type"),
        pytest.param({"qosClass": "GOLD"}, "spec.qosClass", id="bad-qos"),
        pytest.param({"colour": "red"}, "spec.colour", id="unknown-field"),
    ],
)
def test_what_cannot_be_rendered_is_refused(spec: dict[str, Any], field: str) -> None:
    """A profile the policy cannot express is refused, naming the field, never applied in part."""
    with pytest.raises(ProfileError, match=field):
        profile(**spec)


def _expressions(policy: dict[str, Any]) -> str:
    return "\n".join(
        m.get("applyConfiguration", m.get("jsonPatch", {}))["expression"]
        for m in policy["spec"]["mutations"]
    )


def test_mappings_and_patch_render_in_koordinators_order() -> None:
    """Profile labels, key mappings, suffixes, QoS, then the patch, then the resource translation."""
    policy, _ = render(
        profile(
            labels={"team": "data"},
            labelKeysMapping={"app": "koordinator.sh/app"},
            labelSuffixes={"team": "-b"},
            patch={"spec": {"schedulerName": "s", "tolerations": [{"key": "k"}]}},
        )
    )
    found = [
        m.get("applyConfiguration", m.get("jsonPatch", {}))["expression"]
        for m in policy["spec"]["mutations"]
    ]
    assert len(found) == 7
    assert '"team": "data"' in found[0]
    assert '"koordinator.sh/app": (has(object.metadata.labels) && "app" in' in found[1]
    assert 'object.metadata.labels["team"] + "-b"' in found[2]
    assert '"koordinator.sh/qosClass": "BE"' in found[3]
    assert 'spec: Object.spec{schedulerName: "s"}' in found[4]
    assert found[5].startswith("[JSONPatch{op: 'add', path: \"/spec/tolerations\"")
    assert "kubernetes.io~1batch-cpu" not in found[6] and "variables.cpuName" in found[6]


def test_partial_probability_waits_for_the_webhooks_draw() -> None:
    """1-99%: every mutation is a no-op unless the webhook's annotation says apply, and the
    policy is reinvoked after the webhook; a suffix is not appended twice."""
    policy, _ = render(profile(probability="30%", labelSuffixes={"a": "-x"}))
    spec = policy["spec"]
    assert spec["reinvocationPolicy"] == "IfNeeded"
    assert "matchConditions" not in spec
    drawn = spec["variables"][0]
    assert drawn["name"] == "drawn" and "'apply'" in drawn["expression"]
    assert '"colocation.nodeqos.io/p"' in drawn["expression"]
    found = _expressions(policy).splitlines()
    assert all(e.startswith("!variables.drawn ? ") for e in found)
    assert '.endsWith("-x")' in found[0]


def test_a_drawn_profile_name_must_fit_an_annotation_key() -> None:
    """1-99% with a name over 63 characters: refused, naming metadata.name (the annotation
    key the webhook writes would make the API server refuse the pod)."""
    with pytest.raises(ProfileError, match=r"metadata\.name"):
        Profile.from_api(
            {"metadata": {"name": "p" * 64}, "spec": {"qosClass": "BE", "probability": 50}}
        )
    assert Profile.from_api({"metadata": {"name": "p" * 64}, "spec": {"probability": 100}})
