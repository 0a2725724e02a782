"""The hot-path reader agrees with the cgroups parsers and translates OS errors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import cgroups
from agent.collectors import hostio

V1, V2 = cgroups.CgroupVersion.V1, cgroups.CgroupVersion.V2

# A real 6.x kernel's memory.stat (trimmed values, every key kept).
V2_MEMORY_STAT = textwrap.dedent("""\
    anon 220921856
    file 1335767040
    kernel 44150784
    kernel_stack 1638400
    pagetables 3014656
    sec_pagetables 0
    percpu 1234
    sock 4096
    vmalloc 8192
    shmem 2715648
    zswap 0
    zswapped 0
    file_mapped 181735424
    file_dirty 135168
    file_writeback 0
    swapcached 0
    anon_thp 41943040
    file_thp 0
    shmem_thp 0
    inactive_anon 8192
    active_anon 223629312
    inactive_file 688128000
    active_file 644923392
    unevictable 40960
    slab_reclaimable 35213048
    slab_unreclaimable 3362856
    slab 38575904
    workingset_refault_anon 0
    workingset_refault_file 12
    pgfault 3216811
    pgmajfault 1500
    thp_fault_alloc 20
""")
V1_MEMORY_STAT = textwrap.dedent("""\
    cache 1335767040
    rss 220921856
    rss_huge 0
    inactive_anon 4096
    active_anon 1024
    inactive_file 5
    active_file 6
    unevictable 0
    hierarchical_memory_limit 9223372036854771712
    total_cache 1335767040
    total_rss 220921856
    total_inactive_anon 8192
    total_active_anon 223629312
    total_inactive_file 688128000
    total_active_file 644923392
    total_unevictable 40960
""")
V2_CPU_STAT = "usage_usec 123456\nuser_usec 100000\nsystem_usec 23456\nnr_periods 40\nnr_throttled 7\nthrottled_usec 900\nnr_bursts 0\nburst_usec 0\n"
V2_CPU_STAT_NO_CFS = "usage_usec 5\nuser_usec 3\nsystem_usec 2\n"
V1_CPU_STAT = "nr_periods 12\nnr_throttled 3\nthrottled_time 4000\n"


@pytest.mark.parametrize(
    ("text", "version"),
    [pytest.param(V2_MEMORY_STAT, V2, id="v2"), pytest.param(V1_MEMORY_STAT, V1, id="v1")],
)
def test_working_set_matches_cgroups_parser(text: str, version: cgroups.CgroupVersion) -> None:
    """The fast sum equals cgroups' MemoryStat.working_set_without_cache for the same text."""
    expected = cgroups.parse_memory_stat(text, version).working_set_without_cache
    assert hostio.parse_working_set(text.encode(), version, "memory.stat") == expected
    assert expected == 8192 + 223629312 + 40960


@pytest.mark.parametrize("text", [V2_CPU_STAT, V2_CPU_STAT_NO_CFS], ids=["cfs", "no-cfs"])
def test_v2_cpu_stat_matches_cgroups_parsers(text: str) -> None:
    """usage in ns and the throttling counters, as cgroups parses them."""
    fast = hostio.parse_cpu_stat_v2(text.encode(), "cpu.stat")
    assert fast.usage_ns == cgroups.parse_cpu_stat_usage(text).usage_ns
    throttling = cgroups.parse_cpu_throttling(text, V2)
    if throttling is None:
        assert (fast.nr_periods, fast.nr_throttled) == (None, None)
    else:
        assert (fast.nr_periods, fast.nr_throttled) == (
            throttling.nr_periods,
            throttling.nr_throttled,
        )


def test_v1_cpu_counters_combine_cpuacct_and_cpu_stat() -> None:
    """cpuacct.usage gives ns; cpu.stat gives the throttling counters."""
    fast = hostio.parse_cpu_stat_v1(b"987654321\n", V1_CPU_STAT.encode(), "u", "s")
    assert fast == hostio.CpuCounters(987654321, 12, 3)
    assert fast.usage_ns == cgroups.parse_cpuacct_usage("987654321\n").usage_ns


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(b"anon 1\n", "inactive_anon", id="missing-key"),
        pytest.param(b"inactive_anon x\nactive_anon 1\nunevictable 0\n", "integer", id="not-int"),
    ],
)
def test_bad_memory_stat_is_malformed(data: bytes, message: str) -> None:
    """A memory.stat without the keys or with garbage raises MalformedFile naming it."""
    with pytest.raises(cgroups.MalformedFile, match=message):
        hostio.parse_working_set(data, V2, "/x/memory.stat")


def test_cpu_stat_without_usage_is_malformed() -> None:
    """v2 cpu.stat must carry usage_usec."""
    with pytest.raises(cgroups.MalformedFile, match="usage_usec"):
        hostio.parse_cpu_stat_v2(b"nr_periods 1\n", "cpu.stat")


def test_missing_file_is_gone(tmp_path: Path) -> None:
    """A vanished file raises CgroupGone with its path."""
    with pytest.raises(cgroups.CgroupGone, match="nope"):
        hostio.read_bytes(str(tmp_path / "nope"))


def test_directory_is_an_io_error(tmp_path: Path) -> None:
    """Reading something that is not a file is a plain CgroupError, not 'gone'."""
    with pytest.raises(cgroups.CgroupError) as caught:
        hostio.read_bytes(str(tmp_path))
    assert not isinstance(caught.value, cgroups.CgroupGone | cgroups.AccessDenied)


def test_reads_the_whole_small_file(tmp_path: Path) -> None:
    """One read returns the whole file."""
    path = tmp_path / "memory.stat"
    path.write_text(V2_MEMORY_STAT)
    assert hostio.read_bytes(str(path)) == V2_MEMORY_STAT.encode()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "inactive_anon 1\nactive_anon 2\nunevictable 4", 7, id="first-line-no-newline-at-end"
        ),
        pytest.param(
            "x_active_anon 100\nactive_anon 2\ninactive_anon 1\nunevictable 4\n",
            7,
            id="key-inside-another",
        ),
        pytest.param(
            "active_anon_x 9\nactive_anon 2\ninactive_anon 1\nunevictable 4\n", 7, id="longer-key"
        ),
    ],
)
def test_working_set_finds_whole_keys_at_line_start(text: str, expected: int) -> None:
    """Only a line starting with exactly the key counts, wherever it sits in the file."""
    assert hostio.parse_working_set(text.encode(), V2, "memory.stat") == expected
