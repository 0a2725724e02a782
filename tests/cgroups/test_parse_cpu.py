"""Parsing CPU interface files: usage, throttling, bandwidth, shares and weight."""

from textwrap import dedent

import pytest

from cgroups import (
    CgroupVersion,
    CpuMax,
    CpuThrottling,
    CpuUsage,
    MalformedFile,
    format_cpu_max,
    parse_cfs_quota,
    parse_cpu_max,
    parse_cpu_stat_usage,
    parse_cpu_throttling,
    parse_cpuacct_usage,
    shares_to_weight,
    weight_to_shares,
)

V1_CPU_STAT = dedent("""\
    nr_periods 120
    nr_throttled 30
    throttled_time 4500000000
    nr_bursts 0
    burst_time 0
""")

V2_CPU_STAT = dedent("""\
    usage_usec 470697137
    user_usec 367552996
    system_usec 103144140
    nr_periods 120
    nr_throttled 30
    throttled_usec 4500000
    nr_bursts 0
    burst_usec 0
""")


def test_v1_cpuacct_usage_is_nanoseconds() -> None:
    """cpuacct.usage is read as-is, in ns."""
    assert parse_cpuacct_usage("472841400218\n") == CpuUsage(usage_ns=472841400218)


def test_v2_usage_usec_is_scaled_to_nanoseconds() -> None:
    """cpu.stat usage_usec becomes ns so both versions share one unit."""
    assert parse_cpu_stat_usage(V2_CPU_STAT) == CpuUsage(usage_ns=470697137000)


def test_throttling_is_identical_across_versions() -> None:
    """v1 throttled_time (ns) and v2 throttled_usec (µs) give the same value."""
    expected = CpuThrottling(nr_periods=120, nr_throttled=30, throttled_ns=4_500_000_000)
    assert parse_cpu_throttling(V1_CPU_STAT, CgroupVersion.V1) == expected
    assert parse_cpu_throttling(V2_CPU_STAT, CgroupVersion.V2) == expected
    assert expected.throttled_ratio == 0.25


def test_throttling_absent_without_cpu_controller() -> None:
    """A v2 cpu.stat with usage only (root, controller off) has no throttling."""
    usage_only = "usage_usec 10\nuser_usec 5\nsystem_usec 5\n"
    assert parse_cpu_throttling(usage_only, CgroupVersion.V2) is None


def test_partial_throttling_keys_are_malformed() -> None:
    """Some but not all throttling keys is an error naming the missing key."""
    with pytest.raises(MalformedFile, match=r"cpu\.stat: missing key\(s\) throttled_usec"):
        parse_cpu_throttling("nr_periods 1\nnr_throttled 0\n", CgroupVersion.V2)


def test_zero_periods_ratio_is_zero() -> None:
    """A never-limited cgroup has a throttled ratio of 0, not a division error."""
    assert CpuThrottling(nr_periods=0, nr_throttled=0, throttled_ns=0).throttled_ratio == 0.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("max 100000\n", CpuMax(quota_us=None, period_us=100000), id="unlimited"),
        pytest.param("50000 100000\n", CpuMax(quota_us=50000, period_us=100000), id="half-cpu"),
        pytest.param("200000 50000", CpuMax(quota_us=200000, period_us=50000), id="no-newline"),
    ],
)
def test_cpu_max(text: str, expected: CpuMax) -> None:
    """cpu.max parses quota (or max) and period and renders back."""
    assert parse_cpu_max(text) == expected
    assert format_cpu_max(expected) == text.strip()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("-1\n", None, id="unlimited"),
        pytest.param("150000\n", 150000, id="limited"),
    ],
)
def test_cfs_quota(text: str, expected: int | None) -> None:
    """cpu.cfs_quota_us -1 means no limit."""
    assert parse_cfs_quota(text) == expected


@pytest.mark.parametrize(
    ("shares", "weight"),
    [
        pytest.param(2, 1, id="min"),
        pytest.param(1024, 39, id="one-cpu"),
        pytest.param(102, 4, id="100m"),
        pytest.param(262144, 10000, id="max"),
    ],
)
def test_shares_to_weight_uses_the_kubelet_formula(shares: int, weight: int) -> None:
    """weight = 1 + ((shares - 2) * 9999) // 262142."""
    assert shares_to_weight(shares) == weight


@pytest.mark.parametrize(
    ("weight", "shares"),
    [
        pytest.param(1, 2, id="min"),
        pytest.param(39, 999, id="one-cpu"),
        pytest.param(100, 2598, id="v2-default"),
        pytest.param(10000, 262144, id="max"),
    ],
)
def test_weight_to_shares_is_the_inverse_mapping(weight: int, shares: int) -> None:
    """shares = 2 + ceil((weight - 1) * 262142 / 9999)."""
    assert weight_to_shares(weight) == shares


def test_weight_round_trips_through_shares() -> None:
    """Every weight survives weight -> shares -> weight (reading then writing is a no-op)."""
    assert all(shares_to_weight(weight_to_shares(w)) == w for w in range(1, 10001))


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: shares_to_weight(1), id="shares-low"),
        pytest.param(lambda: shares_to_weight(262145), id="shares-high"),
        pytest.param(lambda: weight_to_shares(0), id="weight-low"),
        pytest.param(lambda: weight_to_shares(10001), id="weight-high"),
    ],
)
def test_conversions_reject_out_of_range(call: object) -> None:
    """Values outside the kernel's ranges are refused, not clamped."""
    with pytest.raises(ValueError, match="outside"):
        call()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        pytest.param(
            lambda: parse_cpuacct_usage("12x\n", source="/cg/cpuacct/p/cpuacct.usage"),
            r"/cg/cpuacct/p/cpuacct\.usage: '12x' is not an integer: '12x'",
            id="usage-not-int",
        ),
        pytest.param(
            lambda: parse_cpuacct_usage("1\n2\n"),
            r"cpuacct\.usage: expected one line, got 2",
            id="usage-two-lines",
        ),
        pytest.param(
            lambda: parse_cpu_stat_usage("user_usec 5\n"),
            r"cpu\.stat: missing key\(s\) usage_usec",
            id="no-usage-usec",
        ),
        pytest.param(
            lambda: parse_cpu_throttling("nr_periods 1 2\n", CgroupVersion.V1),
            r"cpu\.stat: expected 'key value': 'nr_periods 1 2'",
            id="three-fields",
        ),
        pytest.param(
            lambda: parse_cpu_max("max\n"),
            r"cpu\.max: expected '<quota\|max> <period>': 'max'",
            id="cpu-max-no-period",
        ),
        pytest.param(
            lambda: parse_cpu_max("lots 100000\n"),
            r"cpu\.max: 'lots' is not an integer",
            id="cpu-max-bad-quota",
        ),
        pytest.param(lambda: parse_cfs_quota(""), r"expected one line, got 0", id="empty"),
    ],
)
def test_malformed_cpu_files_name_file_and_line(call: object, message: str) -> None:
    """A bad file raises MalformedFile naming the file and the offending line."""
    with pytest.raises(MalformedFile, match=message):
        call()  # type: ignore[operator]
