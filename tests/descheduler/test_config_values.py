"""Value parsing shared by all Args: Go durations, int-or-percent, selectors, numbers."""

from __future__ import annotations

from datetime import timedelta

import pytest

from descheduler.config import codecs, common, selectors
from descheduler.config.errors import Errors, FieldPath, Invalid, Reported
from kube import configcodecs, quantity
from kube import selectors as kube_selectors


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("0", timedelta(0), id="zero"),
        pytest.param("60s", timedelta(seconds=60), id="seconds"),
        pytest.param("5m", timedelta(minutes=5), id="minutes"),
        pytest.param("1h30m", timedelta(hours=1, minutes=30), id="compound"),
        pytest.param("1.5s", timedelta(milliseconds=1500), id="fraction"),
        pytest.param("300ms", timedelta(milliseconds=300), id="millis"),
        pytest.param("2us", timedelta(microseconds=2), id="micros"),
        pytest.param("1\u00b5s", timedelta(microseconds=1), id="micro-sign"),
        pytest.param("-2m", timedelta(minutes=-2), id="negative"),
        pytest.param(".5h", timedelta(minutes=30), id="leading-dot"),
    ],
)
def test_go_durations_parse(text: str, expected: timedelta) -> None:
    """Go's time.ParseDuration syntax is understood."""
    assert quantity.parse_go_duration(text) == expected


@pytest.mark.parametrize("text", ["", "5", "5 m", "1d", "m", "1h-5m", "."])
def test_bad_go_durations_are_rejected(text: str) -> None:
    """Anything ParseDuration rejects is rejected."""
    with pytest.raises(ValueError):
        quantity.parse_go_duration(text)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(timedelta(0), "0s", id="zero"),
        pytest.param(timedelta(seconds=10), "10s", id="seconds"),
        pytest.param(timedelta(minutes=5), "5m0s", id="minutes"),
        pytest.param(timedelta(hours=1, minutes=30), "1h30m0s", id="hours"),
        pytest.param(timedelta(milliseconds=500), "500ms", id="millis"),
        pytest.param(timedelta(microseconds=1500), "1.5ms", id="fractional-millis"),
        pytest.param(
            timedelta(seconds=90, microseconds=250000), "1m30.25s", id="fractional-seconds"
        ),
        pytest.param(timedelta(microseconds=7), "7us", id="micros"),
    ],
)
def test_durations_render_like_go_and_parse_back(value: timedelta, text: str) -> None:
    """Written durations look like Go's Duration.String and read back equal."""
    assert configcodecs.render_duration(value) == text
    assert quantity.parse_go_duration(text) == value


def decode(codec: codecs.Codec[object], raw: object) -> object:
    return codec.decode(raw, FieldPath("f"), Errors())


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(5, common.IntOrPercent(5), id="int"),
        pytest.param("10%", common.IntOrPercent(10, percent=True), id="percent"),
    ],
)
def test_int_or_percent(raw: object, expected: common.IntOrPercent) -> None:
    """Koordinator's maxMigratingPerWorkload forms."""
    assert common.INT_OR_PERCENT.decode(raw, FieldPath("f"), Errors()) == expected
    assert common.INT_OR_PERCENT.encode(expected) == raw


@pytest.mark.parametrize("raw", ["5", "ten%", -1, 1.5, True])
def test_int_or_percent_rejects(raw: object) -> None:
    """A plain numeric string is not a percentage (intstr refuses it too)."""
    with pytest.raises(Invalid):
        common.INT_OR_PERCENT.decode(raw, FieldPath("f"), Errors())


def test_percent_scales_rounding_up() -> None:
    """Like intstr.GetScaledValueFromIntOrPercent(..., roundUp=true)."""
    assert common.IntOrPercent(10, percent=True).scaled(15) == 2
    assert common.IntOrPercent(10, percent=True).scaled(15, round_up=False) == 1
    assert common.IntOrPercent(3).scaled(100) == 3


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param("20", "must be a number, not a string", id="quoted"),
        pytest.param(True, "must be a number, not a boolean", id="bool"),
        pytest.param(-1, "must be within [0, 100]", id="negative"),
        pytest.param(100.5, "must be within [0, 100]", id="above"),
    ],
)
def test_threshold_values(raw: object, message: str) -> None:
    """Percentages are YAML numbers within [0, 100]."""
    errors = Errors()
    with pytest.raises(Reported):
        common.THRESHOLDS.decode({"cpu": raw}, FieldPath("t"), errors)
    assert [str(error) for error in errors] == [f"t.cpu: {message}"]


def test_numeric_string_codec_accepts_koordinator_evict_qps() -> None:
    """evictQPS may be "10" or 10; zero is rejected."""
    codec = codecs.NumberOrNumericString(codecs.Number(above=0))
    assert codec.decode("10", FieldPath("q"), Errors()) == 10.0
    assert codec.decode(2.5, FieldPath("q"), Errors()) == 2.5
    with pytest.raises(Invalid, match="must be > 0"):
        codec.decode("0", FieldPath("q"), Errors())


@pytest.mark.parametrize(
    ("text", "labels", "selected"),
    [
        pytest.param("zone=a", {"zone": "a"}, True, id="equals"),
        pytest.param("zone!=a", {}, True, id="not-equals-missing"),
        pytest.param("zone in (a,b),!gpu", {"zone": "b", "gpu": "1"}, False, id="not-exists"),
        pytest.param("", {"any": "thing"}, True, id="empty"),
    ],
)
def test_string_selectors(text: str, labels: dict[str, str], selected: bool) -> None:
    """String selectors decode to kube selectors with labels.Parse semantics."""
    selector = selectors.STRING.decode(text, FieldPath("s"), Errors())
    assert selector.matches(labels) is selected
    assert (
        selectors.STRING.decode(selectors.STRING.encode(selector), FieldPath("s"), Errors())
        == selector
    )


def test_mapping_selector_equals_string_selector() -> None:
    """matchLabels/matchExpressions and the string form mean the same selector."""
    mapping = {
        "matchLabels": {"zone": "a"},
        "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}],
    }
    decoded = selectors.MAPPING.decode(mapping, FieldPath("s"), Errors())
    assert decoded == kube_selectors.parse_selector("zone=a,tier notin (db)")
    assert (
        selectors.MAPPING.decode(selectors.MAPPING.encode(decoded), FieldPath("s"), Errors())
        == decoded
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            {"matchLabel": {"a": "b"}},
            ['s.matchLabel: unknown field (did you mean "matchLabels"?)'],
            id="typo",
        ),
        pytest.param(
            {"matchLabels": {"a": 1}},
            ["s.matchLabels.a: labels and values must be strings (got 'a': 1)"],
            id="int-value",
        ),
        pytest.param(
            {"matchLabels": {"bad key!": "x"}},
            ["s.matchLabels[bad key!]: invalid label key 'bad key!'"],
            id="bad-key",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
            ["s.matchExpressions[0].operator: Gt is not allowed in a label selector"],
            id="gt-in-mapping",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["1"]}]},
            ["s.matchExpressions[0].values: must be empty for Exists"],
            id="exists-with-values",
        ),
    ],
)
def test_mapping_selector_errors(raw: object, expected: list[str]) -> None:
    """Structure, label syntax and operator rules are reported at their paths."""
    errors = Errors()
    with pytest.raises(Reported):
        selectors.MAPPING.decode(raw, FieldPath("s"), errors)
    found = [str(error) for error in errors]
    assert len(found) == len(expected)
    for line, prefix in zip(found, expected, strict=True):
        assert line.startswith(prefix), line


def test_path_rendering() -> None:
    """Map keys read after a dot when plain, in brackets otherwise."""
    root = (
        FieldPath()
        .child("profiles")
        .index(0)
        .child("pluginConfig")
        .named("LowNodeLoad")
        .child("args")
    )
    assert str(root.child("highThresholds").key("cpu")) == (
        "profiles[0].pluginConfig[LowNodeLoad].args.highThresholds.cpu"
    )
    assert str(root.child("highThresholds").key("nvidia.com/gpu")).endswith(
        "highThresholds[nvidia.com/gpu]"
    )
