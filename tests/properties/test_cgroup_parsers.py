"""cgroup and /proc files as the kernel (or a broken or hostile one) may write them:
each parser returns its typed value or raises MalformedFile naming the file."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cgroups
from cgroups import CgroupVersion, MalformedFile
from cgroups import layout as cgroup_layout
from cgroups import parse as cgroups_parse

_KEYS = [
    "usage_usec", "user_usec", "system_usec", "nr_periods", "nr_throttled", "throttled_usec",
    "throttled_time", "inactive_anon", "active_anon", "unevictable", "inactive_file",
    "active_file", "file", "anon", "total_inactive_anon", "total_active_anon",
    "total_unevictable", "total_inactive_file", "total_active_file", "total_cache",
    "total_rss", "some", "full", "cpu", "btime", "MemTotal:", "MemAvailable:", "kB", "max",
]  # fmt: skip
_NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["0", "max", "-1", "9" * 5000, "1_000", "١٢", "0x10", "1e3", "nan", ""]),
    st.builds(
        lambda key, value: f"{key}={value}",
        st.sampled_from(["avg10", "avg60", "avg300", "total"]),
        st.one_of(st.floats().map(str), st.integers(-5, 10**20).map(str), st.text(max_size=5)),
    ),
)
_TOKENS = st.one_of(st.sampled_from(_KEYS), _NUMBERS, st.text(max_size=8))
_LINES = st.lists(
    st.builds(
        lambda tokens, sep: sep.join(tokens),
        st.lists(_TOKENS, max_size=10),
        st.sampled_from([" ", "\t", ":", ",", "-", "::", " ("]),
    ),
    max_size=8,
)
# Kernel-like files built from plausible tokens, and arbitrary text.
kernel_text = st.one_of(_LINES.map("\n".join), st.text(max_size=200))

PARSERS: dict[str, Callable[[str], Any]] = {
    "cpuacct.usage": lambda text: cgroups.parse_cpuacct_usage(text),
    "cpu.stat usage": lambda text: cgroups.parse_cpu_stat_usage(text),
    "cpu.stat v1 throttling": lambda text: cgroups.parse_cpu_throttling(text, CgroupVersion.V1),
    "cpu.stat v2 throttling": lambda text: cgroups.parse_cpu_throttling(text, CgroupVersion.V2),
    "memory.stat v1": lambda text: cgroups.parse_memory_stat(text, CgroupVersion.V1),
    "memory.stat v2": lambda text: cgroups.parse_memory_stat(text, CgroupVersion.V2),
    "memory.max": lambda text: cgroups.parse_memory_limit(text, source="memory.max"),
    "cpu.cfs_quota_us": lambda text: cgroups.parse_cfs_quota(text),
    "cpu.max": lambda text: cgroups.parse_cpu_max(text),
    "cpuset.cpus": lambda text: cgroups.parse_cpuset(text),
    "cpu.pressure": lambda text: cgroups.parse_pressure(text, source="cpu.pressure"),
    "/proc/stat cpu": lambda text: cgroups.parse_proc_stat(text),
    "/proc/stat btime": lambda text: cgroups.parse_boot_time(text),
    "/proc/meminfo": lambda text: cgroups.parse_meminfo(text),
    "/proc/<pid>/stat": lambda text: cgroups.parse_pid_stat(text),
    "/proc/<pid>/cgroup": lambda text: cgroups.parse_pid_cgroup(text),
}


@pytest.mark.parametrize("name", list(PARSERS))
@given(text=kernel_text)
def test_a_file_parses_or_raises_malformed_file(name: str, text: str) -> None:
    """Every parser: its value, or MalformedFile with the file and the reason."""
    try:
        PARSERS[name](text)
    except MalformedFile as err:
        assert err.source and err.reason


@given(st.lists(st.integers(min_value=0, max_value=4095), max_size=64))
def test_a_formatted_cpuset_parses_back(cpus: list[int]) -> None:
    """format_cpuset → parse_cpuset is the identity."""
    assert cgroups.parse_cpuset(cgroups.format_cpuset(cpus)) == frozenset(cpus)


@given(
    st.one_of(
        st.text(max_size=80),
        st.builds("{}://{}".format, st.text(max_size=12), st.text(max_size=20)),
    )
)
def test_a_container_id_parses_or_raises_value_error(status_id: str) -> None:
    """A pod status containerID: runtime and id, or ValueError quoting it."""
    try:
        ref = cgroup_layout.parse_container_id(status_id)
    except ValueError as err:
        assert repr(status_id) in str(err)
        return
    assert ref.id and "/" not in ref.id


@given(
    st.lists(
        st.tuples(st.integers(-3, 2**40), st.sampled_from(["", "-"]), st.integers(-3, 2**40)),
        min_size=1,
        max_size=4,
    )
)
def test_a_cpuset_list_parses_quickly_or_raises_malformed_file(ranges: list[Any]) -> None:
    """Ranges up to 2**40 wide: a set of CPU numbers the kernel can have, or MalformedFile
    (never a set of a trillion ints: a hostile file must not exhaust the agent's memory)."""
    text = ",".join(f"{low}{sep}{high}" if sep else str(low) for low, sep, high in ranges)
    try:
        cpus = cgroups.parse_cpuset(text)
    except MalformedFile as err:
        assert err.source == "cpuset.cpus"
        return
    assert all(0 <= cpu <= cgroups_parse.MAX_CPU_ID for cpu in cpus)
