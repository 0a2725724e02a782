"""Parsing cpuset lists and pressure stall information files."""

from textwrap import dedent

import pytest

from cgroups import (
    MalformedFile,
    Pressure,
    PressureLine,
    format_cpuset,
    parse_cpuset,
    parse_pressure,
)


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        pytest.param("0-3,8,10-11\n", {0, 1, 2, 3, 8, 10, 11}, id="mixed"),
        pytest.param("5\n", {5}, id="single"),
        pytest.param("\n", set(), id="empty"),
        pytest.param("0-0", {0}, id="degenerate-range"),
    ],
)
def test_parse_cpuset(text: str, cpus: set[int]) -> None:
    """Kernel list format becomes a frozenset of CPU numbers."""
    assert parse_cpuset(text) == frozenset(cpus)


@pytest.mark.parametrize(
    ("cpus", "text"),
    [
        pytest.param({0, 1, 2, 3, 8, 10, 11}, "0-3,8,10-11", id="mixed"),
        pytest.param({3, 1, 2}, "1-3", id="unsorted-input"),
        pytest.param({4, 6}, "4,6", id="gaps"),
        pytest.param(set(), "", id="empty"),
    ],
)
def test_format_cpuset(cpus: set[int], text: str) -> None:
    """Formatting sorts and collapses runs the way the kernel prints them."""
    assert format_cpuset(cpus) == text
    assert parse_cpuset(text) == frozenset(cpus)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("3-1", r"cpuset\.cpus: bad range '3-1': '3-1'", id="reversed"),
        pytest.param("0-3,x", r"'x' is not an integer: '0-3,x'", id="letter"),
        pytest.param("1-", r"'' is not an integer", id="open-range"),
    ],
)
def test_malformed_cpuset(text: str, message: str) -> None:
    """Bad cpuset lists name the file and the whole line."""
    with pytest.raises(MalformedFile, match=message):
        parse_cpuset(text)


def test_format_rejects_negative_cpu() -> None:
    """A negative CPU number cannot be written."""
    with pytest.raises(ValueError, match="negative"):
        format_cpuset({-1, 2})


def test_pressure_with_full_line() -> None:
    """Memory and IO pressure carry some and full lines."""
    text = dedent("""\
        some avg10=0.44 avg60=0.38 avg300=0.60 total=4629998
        full avg10=0.00 avg60=0.07 avg300=0.40 total=3175857
    """)
    assert parse_pressure(text, source="io.pressure") == Pressure(
        some=PressureLine(avg10=0.44, avg60=0.38, avg300=0.60, total_us=4629998),
        full=PressureLine(avg10=0.0, avg60=0.07, avg300=0.40, total_us=3175857),
    )


def test_cpu_pressure_may_lack_full() -> None:
    """Kernels before 5.13 print no full line for cpu.pressure."""
    parsed = parse_pressure(
        "some avg10=60.43 avg60=64.05 avg300=37.58 total=160623018\n", source="cpu.pressure"
    )
    assert parsed.full is None
    assert parsed.some.avg10 == 60.43


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "some avg10=1 avg60=2 total=3\n",
            "expected 'avg10= avg60= avg300= total='",
            id="missing-avg300",
        ),
        pytest.param("some avg10=x avg60=2 avg300=3 total=3\n", "avg10=x", id="not-a-number"),
        pytest.param(
            "half avg10=1 avg60=2 avg300=3 total=4\n", "unknown pressure kind 'half'", id="bad-kind"
        ),
        pytest.param("full avg10=1 avg60=2 avg300=3 total=4\n", "no 'some' line", id="no-some"),
    ],
)
def test_malformed_pressure(text: str, message: str) -> None:
    """Bad PSI content names the file and line."""
    with pytest.raises(MalformedFile, match=rf"^cpu\.pressure: .*{message}"):
        parse_pressure(text, source="cpu.pressure")
