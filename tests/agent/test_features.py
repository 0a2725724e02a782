"""Feature gates: one alphabetical table, strict parsing, no global state."""

from __future__ import annotations

import pytest

from agent import features
from qosmanager import features as qfeatures


def test_table_is_alphabetical_and_unique() -> None:
    """The table is kept sorted by name, each name once."""
    names = [f.name for f in features.FEATURES]
    assert names == sorted(names, key=str.lower)
    assert len(set(names)) == len(names)


def test_one_table_gates_collectors_and_qos_strategies() -> None:
    """The agent's table is qosmanager's strategy gates plus the collector gates, same type."""
    assert set(features.FEATURES) == {*qfeatures.BUILTIN_FEATURES, *features.COLLECTOR_FEATURES}
    assert all(isinstance(f, qfeatures.Feature) for f in features.FEATURES)
    assert isinstance(features.parse(""), qfeatures.FeatureGates)


@pytest.mark.parametrize(
    ("name", "default"),
    [
        ("BECPUSuppress", True),
        ("CPUBurst", True),
        ("BECPUEvict", False),
        ("BEMemoryEvict", False),
        ("CgroupReconcile", False),
        ("SystemConfig", False),
        ("BatchResource", True),
        ("BECPUIdle", False),
        ("PSICollector", False),
    ],
)
def test_koordinator_defaults(name: str, default: bool) -> None:
    """Gates default as koordlet's do."""
    assert features.defaults().enabled(name) is default


def test_parse_overrides_and_keeps_other_defaults() -> None:
    """Named gates change; unnamed ones keep their default; blanks and spaces are fine."""
    gates = features.parse(" BECPUSuppress=false, PSICollector=True ,")
    assert gates.enabled("BECPUSuppress") is False
    assert gates.enabled("PSICollector") is True
    assert gates.enabled("CPUBurst") is True


def test_later_entry_wins() -> None:
    """A gate named twice takes the last value, as in Kubernetes."""
    assert features.parse("CPUBurst=false,CPUBurst=1").enabled("CPUBurst") is True


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "Nope=true", "unknown feature gate 'Nope'; known gates: BECPUEvict", id="unknown"
        ),
        pytest.param("CPUBurst", "is not Name=true", id="no-value"),
        pytest.param("CPUBurst=yes", "'yes' is not true or false", id="not-bool"),
        pytest.param("CPUBurst=tRuE", "'tRuE' is not true or false", id="not-parsebool"),
        pytest.param("=true", "is not Name=true", id="no-name"),
    ],
)
def test_parse_rejects_with_a_reason(text: str, message: str) -> None:
    """Bad input raises ValueError saying what is wrong (unknown names list the known ones)."""
    with pytest.raises(ValueError, match=message):
        features.parse(text)


def test_unknown_gate_lookup_is_an_error() -> None:
    """Asking for a gate that does not exist is a bug, not False."""
    with pytest.raises(KeyError, match="Typo"):
        features.defaults().enabled("Typo")


def test_gates_are_values() -> None:
    """Two parses are independent; nothing is shared or mutated."""
    on = features.parse("PSICollector=true")
    off = features.parse("")
    assert on.enabled("PSICollector") and not off.enabled("PSICollector")
    assert on.as_dict()["PSICollector"] and not off.as_dict()["PSICollector"]
