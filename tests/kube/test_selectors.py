"""Label selectors, the string selector syntax and node selectors (kube.selectors)."""

from __future__ import annotations

from typing import Any

import pytest

from kube import selectors
from kube.selectors import LabelSelector, NodeSelector

LABELS = {"app": "web", "tier": "front", "zone": "z1", "cores": "8"}


@pytest.mark.parametrize(
    ("raw", "matches"),
    [
        pytest.param({}, True, id="empty-selects-everything"),
        pytest.param({"matchLabels": {"app": "web"}}, True, id="match-labels"),
        pytest.param({"matchLabels": {"app": "db"}}, False, id="match-labels-mismatch"),
        pytest.param(
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "back"]}]},
            True,
            id="in",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]},
            False,
            id="not-in",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "missing", "operator": "NotIn", "values": ["x"]}]},
            True,
            id="not-in-matches-missing-label",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "app", "operator": "Exists"}]}, True, id="exists"
        ),
        pytest.param(
            {"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]},
            False,
            id="does-not-exist",
        ),
        pytest.param(
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]}],
            },
            False,
            id="labels-and-expressions-are-ANDed",
        ),
    ],
)
def test_label_selector_matching(raw: dict[str, Any], matches: bool) -> None:
    """matchLabels and matchExpressions follow apimachinery semantics."""
    assert LabelSelector.from_api(raw).matches(LABELS) is matches


def test_missing_selector_matches_nothing() -> None:
    """A None selector selects nothing, an empty one everything (LabelSelectorAsSelector)."""
    assert LabelSelector.from_api(None) is selectors.NOTHING
    assert not selectors.NOTHING.matches({})
    assert LabelSelector.from_api({}).is_everything and selectors.EVERYTHING.matches({})


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        pytest.param(
            {"key": "a", "operator": "Equals", "values": ["x"]}, r"\[0\]\.operator", id="bad-op"
        ),
        pytest.param(
            {"key": "a", "operator": "In", "values": []}, r"\[0\]\.values", id="in-no-values"
        ),
        pytest.param(
            {"key": "a", "operator": "Exists", "values": ["x"]},
            r"\[0\]\.values",
            id="exists-values",
        ),
        pytest.param(
            {"key": "a", "operator": "Gt", "values": ["1"]}, r"\[0\]\.operator", id="gt-in-label"
        ),
        pytest.param({"operator": "Exists"}, r"\[0\]\.key", id="no-key"),
    ],
)
def test_invalid_label_selector_names_the_field(expr: dict[str, Any], message: str) -> None:
    """Malformed expressions raise ValueError with the field path."""
    with pytest.raises(ValueError, match=r"spec\.sel\.matchExpressions" + message):
        LabelSelector.from_api({"matchExpressions": [expr]}, "spec.sel")


@pytest.mark.parametrize(
    ("text", "labels", "matches"),
    [
        pytest.param("app=web", LABELS, True, id="equals"),
        pytest.param("app==web", LABELS, True, id="double-equals"),
        pytest.param("app!=web", LABELS, False, id="not-equals"),
        pytest.param("other!=x", LABELS, True, id="not-equals-missing"),
        pytest.param("tier in (front,back)", LABELS, True, id="in"),
        pytest.param("tier notin (front)", LABELS, False, id="notin"),
        pytest.param("zone", LABELS, True, id="exists"),
        pytest.param("!zone", LABELS, False, id="does-not-exist"),
        pytest.param("cores>4", LABELS, True, id="gt"),
        pytest.param("cores<4", LABELS, False, id="lt"),
        pytest.param("app<4", LABELS, False, id="lt-non-integer-label"),
        pytest.param("a=b,c!=d,e in (x,y),!f", {"a": "b", "e": "y"}, True, id="combined"),
        pytest.param(
            "a=b,c!=d,e in (x,y),!f", {"a": "b", "e": "y", "f": ""}, False, id="combined-f"
        ),
        pytest.param(" app = web , tier in ( front , back ) ", LABELS, True, id="whitespace"),
        pytest.param("empty=", {"empty": ""}, True, id="empty-value"),
        pytest.param("", {}, True, id="empty-string-selects-all"),
        pytest.param(
            "node-role.kubernetes.io/worker",
            {"node-role.kubernetes.io/worker": ""},
            True,
            id="prefix",
        ),
    ],
)
def test_parse_selector(text: str, labels: dict[str, str], matches: bool) -> None:
    """The string syntax of labels.Parse, as DeschedulerConfiguration.nodeSelector uses."""
    assert selectors.parse_selector(text).matches(labels) is matches


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a=b,", id="trailing-comma"),
        pytest.param("a in (x", id="unclosed-set"),
        pytest.param("a in x", id="set-without-parens"),
        pytest.param("=b", id="no-key"),
        pytest.param("a b", id="two-words"),
        pytest.param("!a=b", id="negated-with-value"),
        pytest.param("a in ()", id="empty-set"),
        pytest.param("-a=b", id="bad-key"),
        pytest.param("a>x", id="gt-non-integer"),
        pytest.param("a,,b", id="double-comma"),
    ],
)
def test_parse_selector_rejects_malformed(text: str) -> None:
    """Malformed selector strings raise ValueError quoting the input."""
    with pytest.raises(ValueError, match="selector"):
        selectors.parse_selector(text)


def test_selector_string_round_trips() -> None:
    """str() of a parsed selector parses back to the same selector."""
    sel = selectors.parse_selector("a=b,c!=d,e in (x,y),!f,g,h>3,i notin (j,k)")
    assert selectors.parse_selector(str(sel)) == sel


def _terms(*terms: dict[str, Any]) -> NodeSelector:
    return NodeSelector.from_api({"nodeSelectorTerms": list(terms)}, "affinity")


NODE_LABELS = {"zone": "z1", "cores": "8", "disk": "ssd"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        pytest.param(
            _terms({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}),
            True,
            id="in",
        ),
        pytest.param(
            _terms(
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]}]},
                {"matchExpressions": [{"key": "disk", "operator": "Exists"}]},
            ),
            True,
            id="terms-are-ORed",
        ),
        pytest.param(
            _terms(
                {
                    "matchExpressions": [
                        {"key": "zone", "operator": "In", "values": ["z1"]},
                        {"key": "disk", "operator": "DoesNotExist"},
                    ]
                }
            ),
            False,
            id="expressions-are-ANDed",
        ),
        pytest.param(
            _terms({"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["4"]}]}),
            True,
            id="gt",
        ),
        pytest.param(
            _terms({"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["4"]}]}),
            False,
            id="lt",
        ),
        pytest.param(
            _terms({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}),
            True,
            id="match-fields-name",
        ),
        pytest.param(
            _terms(
                {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}
            ),
            False,
            id="match-fields-not-in",
        ),
        pytest.param(_terms({}), False, id="empty-term-matches-nothing"),
        pytest.param(_terms(), False, id="no-terms-match-nothing"),
    ],
)
def test_node_selector_matching(selector: NodeSelector, matches: bool) -> None:
    """Node selector terms follow the scheduler's required node affinity."""
    assert selector.matches(NODE_LABELS, "n1") is matches


@pytest.mark.parametrize(
    ("term", "message"),
    [
        pytest.param(
            {"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["u"]}]},
            r"affinity\.nodeSelectorTerms\[0\]\.matchFields\[0\]\.key",
            id="unsupported-field",
        ),
        pytest.param(
            {"matchFields": [{"key": "metadata.name", "operator": "Exists"}]},
            r"affinity\.nodeSelectorTerms\[0\]\.matchFields\[0\]\.operator",
            id="field-operator",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]}]},
            r"affinity\.nodeSelectorTerms\[0\]\.matchExpressions\[0\]\.operator",
            id="bad-operator",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1", "2"]}]},
            r"affinity\.nodeSelectorTerms\[0\]\.matchExpressions\[0\]\.values",
            id="gt-two-values",
        ),
    ],
)
def test_invalid_node_selector_names_the_field(term: dict[str, Any], message: str) -> None:
    """Malformed node selector terms raise ValueError with the field path."""
    with pytest.raises(ValueError, match=message):
        _terms(term)
