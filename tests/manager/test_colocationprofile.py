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
    expression = policy["spec"]["mutations"][0]["applyConfiguration"]["expression"]
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
        pytest.param({"probability": "50%"}, "spec.probability", id="partial-probability"),
        pytest.param({"probability": "x"}, "spec.probability", id="bad-probability"),
        pytest.param({"patch": {"metadata": {"labels": {"a": "b"}}}}, "spec.patch", id="patch"),
        pytest.param({"labelSuffixes": {"a": "-x"}}, "spec.labelSuffixes", id="label-suffixes"),
        pytest.param({"qosClass": "GOLD"}, "spec.qosClass", id="bad-qos"),
        pytest.param({"colour": "red"}, "spec.colour", id="unknown-field"),
    ],
)
def test_what_cannot_be_rendered_is_refused(spec: dict[str, Any], field: str) -> None:
    """A profile the policy cannot express is refused, naming the field, never applied in part."""
    with pytest.raises(ProfileError, match=field.replace(".", r"\.")):
        profile(**spec)
