"""The one config layer (kube.configstruct, kube.configcodecs): specs, paths, every error, merge."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from kube import configcodecs as codecs
from kube import configstruct
from kube.configstruct import Errors, FieldPath, spec


@dataclass(frozen=True, slots=True, kw_only=True)
class Inner:
    level: int | None = field(default=None, metadata=spec("level", codecs.PERCENT))
    mode: str | None = field(default=None, metadata=spec("mode", codecs.KeyChoice(("", "on"))))


@dataclass(frozen=True, slots=True, kw_only=True)
class Outer:
    name: str = field(default="", metadata=spec("name", codecs.NAME, required=True))
    inner: Inner | None = field(
        default=None, metadata=spec("inner", configstruct.Nested(Inner, partial=True))
    )
    size: str | int | float | None = field(default=None, metadata=spec("size", codecs.QUANTITY))
    extra: Mapping[str, Any] | None = field(default=None, metadata=spec("extra", codecs.JSON))
    window: timedelta | None = field(default=None, metadata=spec("window", codecs.DURATION))


def problems(errors: Errors) -> list[str]:
    return [str(error) for error in errors]


def test_every_problem_is_listed_with_its_path_and_a_fix() -> None:
    """Unknown keys, wrong types, ranges, enums, quantities, durations: one line each."""
    errors = Errors()
    raw = {
        "nmae": "x",
        "inner": {"level": 150, "mode": "off"},
        "size": "lots",
        "window": 5,
    }
    configstruct.decode_object(Outer, raw, FieldPath("spec"), errors)
    assert problems(errors) == [
        'spec.nmae: unknown field (did you mean "name"?)',
        "spec.inner.level: must be within [0, 100] (got 150)",
        "spec.inner.mode: must be one of: on",
        'spec.size: invalid quantity \'lots\' (write it like "500m" or "2Gi")',
        'spec.window: must be a duration string such as "90s", "5m" or "1h30m", not a number',
        "spec.name: required; set name",
    ]


def test_a_partial_struct_keeps_its_good_fields() -> None:
    """decode_partial is Go's json.Unmarshal: the bad field is unset, its siblings are kept."""
    errors = Errors()
    found = configstruct.decode_partial(
        Outer, {"name": "a", "inner": {"level": "high", "mode": "on"}}, FieldPath("x"), errors
    )
    assert found.inner == Inner(mode="on")
    assert problems(errors) == ["x.inner.level: must be an integer, not a string"]


def test_a_strict_nested_struct_is_dropped_whole_on_a_problem() -> None:
    """Without `partial`, a nested struct with any problem is left at its default."""

    @dataclass(frozen=True, slots=True, kw_only=True)
    class Strict:
        inner: Inner | None = field(
            default=None, metadata=spec("inner", configstruct.Nested(Inner))
        )

    errors = Errors()
    found = configstruct.decode_object(
        Strict, {"inner": {"level": 5, "mode": "x"}}, FieldPath("s"), errors
    )
    assert found.inner is None
    assert len(errors) == 1


def test_decode_partial_never_raises_on_a_non_mapping() -> None:
    """A list where an object belongs is reported and gives the empty struct."""
    errors = Errors()
    assert configstruct.decode_partial(Inner, [1], FieldPath("p"), errors) == Inner()
    assert problems(errors) == ["p: must be a mapping, not a list"]


def test_merge_is_go_unmarshal_over_a_base() -> None:
    """Set fields win, nested structs and JSON objects merge key by key, unset keeps the base."""
    base = Outer(name="a", inner=Inner(level=1, mode="on"), extra={"k": {"x": 1, "y": 2}})
    over = Outer(name="b", inner=Inner(level=7), extra={"k": {"y": 3}})
    merged = configstruct.merge(base, over)
    assert merged.name == "b"
    assert merged.inner == Inner(level=7, mode="on")
    assert merged.extra == {"k": {"x": 1, "y": 3}}


def test_encode_omits_unset_and_round_trips() -> None:
    """What encode_object writes decodes back to an equal object; None fields are left out."""
    obj = Outer(
        name="a", inner=Inner(level=3), size=4, extra={"a": [1]}, window=timedelta(minutes=90)
    )
    wire = configstruct.encode_object(obj)
    assert wire == {
        "name": "a",
        "inner": {"level": 3},
        "size": 4,
        "extra": {"a": [1]},
        "window": "1h30m0s",
    }
    errors = Errors()
    assert configstruct.decode_object(Outer, wire, FieldPath(), errors) == obj
    assert not len(errors)


def test_decode_fields_gives_only_what_is_set() -> None:
    """decode_fields returns the set fields by attribute name, for a merge over a base."""
    errors = Errors()
    changes, failed = configstruct.decode_fields(
        Inner, {"level": 5, "mode": 1, "skip": True}, FieldPath("i"), errors, handled=("skip",)
    )
    assert changes == {"level": 5}
    assert failed == frozenset({"mode"})


@pytest.mark.parametrize(
    ("codec", "raw", "expected"),
    [
        pytest.param(codecs.Integer(whole_floats=True), 60.0, 60, id="whole-float"),
        pytest.param(codecs.Duration(signed=True), "-1m", timedelta(minutes=-1), id="signed"),
        pytest.param(codecs.JSON_LIST, [{"a": 1}], [{"a": 1}], id="json-list"),
    ],
)
def test_codec_options(codec: configstruct.Codec[Any], raw: object, expected: object) -> None:
    """Options widen what a codec takes only where asked."""
    assert codec.decode(raw, FieldPath("f"), Errors()) == expected


@pytest.mark.parametrize(
    ("codec", "raw", "message"),
    [
        pytest.param(codecs.INTEGER, 1.5, "must be an integer, not 1.5", id="fraction"),
        pytest.param(codecs.INTEGER, 60.0, "must be an integer, not 60.0", id="strict-float"),
        pytest.param(codecs.DURATION, "-1m", "must not be negative", id="unsigned"),
        pytest.param(codecs.JSON, [], "must be a mapping, not a list", id="json-object"),
        pytest.param(codecs.PERCENT, -1, "must be within [0, 100] (got -1)", id="percent"),
    ],
)
def test_codec_refusals(codec: configstruct.Codec[Any], raw: object, message: str) -> None:
    """Each refusal says what is expected."""
    with pytest.raises(configstruct.Invalid) as caught:
        codec.decode(raw, FieldPath("f"), Errors())
    assert caught.value.message == message


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(timedelta(0), "0s", id="zero"),
        pytest.param(timedelta(microseconds=7), "7us", id="micros"),
        pytest.param(timedelta(minutes=-2), "-2m0s", id="negative"),
    ],
)
def test_durations_render_like_go(value: timedelta, text: str) -> None:
    """render_duration writes Go's Duration.String form."""
    assert codecs.render_duration(value) == text


def test_unknown_keys_can_be_ignored_as_go_does() -> None:
    """ignore_unknown: keys nobody declared are skipped silently, declared ones still checked."""
    errors = Errors()
    found = configstruct.decode_object(
        Inner, {"level": 101, "future": 1}, FieldPath("n"), errors, ignore_unknown=True
    )
    assert found == Inner()
    assert problems(errors) == ["n.level: must be within [0, 100] (got 101)"]
