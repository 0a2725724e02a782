"""Resource quantities and Go durations from outside: each decodes or raises ValueError."""

from __future__ import annotations

from datetime import timedelta
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from agent import config as agent_config
from kube import configcodecs, configstruct, quantity
from tests.properties.strategies import duration_text, json_values, quantity_text


@given(st.one_of(quantity_text, json_values))
def test_a_quantity_parses_exactly_or_raises_value_error(raw: object) -> None:
    """parse_quantity and its integer helpers: a Fraction/int, or ValueError naming the input."""
    try:
        value = quantity.parse_quantity(raw)  # type: ignore[arg-type]
    except ValueError as err:
        assert "quantity" in str(err)
        return
    assert isinstance(value, Fraction)
    assert (value * 10**9).denominator == 1  # never finer than a nano
    assert isinstance(quantity.cpu_millis(raw), int)  # type: ignore[arg-type]
    assert isinstance(quantity.memory_bytes(raw), int)  # type: ignore[arg-type]


@given(st.dictionaries(st.text(max_size=10), st.one_of(quantity_text, json_values), max_size=4))
def test_a_resource_list_decodes_or_raises_value_error(raw: dict[str, object]) -> None:
    """Resources.from_api: integer amounts per name, or ValueError."""
    try:
        decoded = quantity.Resources.from_api(raw)
    except ValueError:
        return
    assert all(isinstance(amount, int) for amount in decoded.values())


@given(st.integers(min_value=0, max_value=2**62))
def test_formatted_cpu_and_bytes_parse_back(amount: int) -> None:
    """What we write is what we read: format_cpu/format_bytes round-trip exactly."""
    assert quantity.cpu_millis(quantity.format_cpu(amount)) == amount
    assert quantity.memory_bytes(quantity.format_bytes(amount)) == amount


@given(duration_text)
def test_a_go_duration_parses_or_raises_value_error(text: str) -> None:
    """kube's Go-duration parser and the config layer's Duration codec agree, or both refuse."""
    try:
        kube_value: timedelta | None = quantity.parse_go_duration(text)
    except ValueError as err:
        assert "duration" in str(err)
        kube_value = None
    try:
        errors = configstruct.Errors()
        config_value: timedelta | None = configcodecs.DURATION.decode(
            text, configstruct.ROOT, errors
        )
    except configstruct.Invalid:
        config_value = None
    if kube_value is not None and kube_value < timedelta(0):
        kube_value = None  # config durations are never negative
    assert kube_value == config_value


@given(duration_text)
def test_an_agent_interval_flag_is_positive_or_refused(text: str) -> None:
    """--collect-interval and friends: positive seconds, or ValueError saying the syntax."""
    try:
        seconds = agent_config.parse_duration(text)
    except ValueError as err:
        assert repr(text) in str(err)
        return
    assert seconds > 0


_GO_MAX_US = (2**63 - 1) // 1000  # Go's Duration is int64 nanoseconds


@given(st.integers(min_value=-_GO_MAX_US, max_value=_GO_MAX_US))
def test_formatted_durations_parse_back(microseconds: int) -> None:
    """What we write parses back exactly (microsecond resolution, Go's range)."""
    value = timedelta(microseconds=microseconds)
    assert quantity.parse_go_duration(quantity.format_go_duration(value)) == value
    assert quantity.parse_go_duration(configcodecs.render_duration(value)) == value
