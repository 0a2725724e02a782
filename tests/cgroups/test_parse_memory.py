"""Parsing memory interface files: memory.stat of both versions and limits."""

from textwrap import dedent

import pytest

from cgroups import CgroupVersion, MalformedFile, MemoryStat, parse_memory_limit, parse_memory_stat

V1_MEMORY_STAT = dedent("""\
    cache 16261120
    rss 7229440
    inactive_anon 0
    active_anon 1531904
    inactive_file 1302528
    active_file 5959680
    unevictable 0
    hierarchical_memory_limit 9223372036854771712
    total_cache 3973910528
    total_rss 103170048
    total_shmem 8998912
    total_inactive_anon 95739904
    total_active_anon 1593344
    total_inactive_file 2140499968
    total_active_file 1833410560
    total_unevictable 14692352
""")

V2_MEMORY_STAT = dedent("""\
    anon 103170048
    file 3973910528
    kernel_stack 16384
    shmem 8998912
    inactive_anon 95739904
    active_anon 1593344
    inactive_file 2140499968
    active_file 1833410560
    unevictable 14692352
    pgfault 39213
""")

EXPECTED = MemoryStat(
    inactive_anon=95739904,
    active_anon=1593344,
    unevictable=14692352,
    inactive_file=2140499968,
    active_file=1833410560,
    cache=3973910528,
    rss=103170048,
)


def test_v1_uses_hierarchical_total_keys() -> None:
    """v1 reads total_* keys, ignoring the cgroup-local ones."""
    assert parse_memory_stat(V1_MEMORY_STAT, CgroupVersion.V1) == EXPECTED


def test_v2_maps_file_and_anon() -> None:
    """v2 `file` is the cache and `anon` the rss: same MemoryStat as v1."""
    assert parse_memory_stat(V2_MEMORY_STAT, CgroupVersion.V2) == EXPECTED


def test_working_set_without_cache() -> None:
    """Working set = inactive_anon + active_anon + unevictable (no page cache)."""
    assert EXPECTED.working_set_without_cache == 95739904 + 1593344 + 14692352


def test_missing_key_names_file_and_key() -> None:
    """A memory.stat without total_unevictable is malformed, naming the key."""
    text = V1_MEMORY_STAT.replace("total_unevictable 14692352\n", "")
    with pytest.raises(
        MalformedFile, match=r"^/x/memory\.stat: missing key\(s\) total_unevictable"
    ):
        parse_memory_stat(text, CgroupVersion.V1, source="/x/memory.stat")


def test_v2_file_read_as_v1_is_malformed() -> None:
    """Parsing with the wrong version fails loudly instead of reading zeros."""
    with pytest.raises(MalformedFile, match="total_inactive_anon"):
        parse_memory_stat(V2_MEMORY_STAT, CgroupVersion.V1)


def test_bad_value_names_line() -> None:
    """A non-integer value names the line it came from."""
    with pytest.raises(MalformedFile, match=r"'active_anon 1\.5'"):
        parse_memory_stat("active_anon 1.5\n", CgroupVersion.V2)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("max\n", None, id="v2-max"),
        pytest.param("9223372036854771712\n", None, id="v1-unlimited-4k-pages"),
        pytest.param("9223372036854710272\n", None, id="v1-unlimited-64k-pages"),
        pytest.param("-1\n", None, id="v1-minus-one"),
        pytest.param("536870912\n", 536870912, id="limited"),
        pytest.param("0\n", 0, id="zero-min"),
    ],
)
def test_memory_limit(text: str, expected: int | None) -> None:
    """Limits parse to bytes; every spelling of 'unlimited' parses to None."""
    assert parse_memory_limit(text, source="memory.max") == expected


def test_negative_memory_limit_is_malformed() -> None:
    """Only -1 is a meaningful negative limit."""
    with pytest.raises(MalformedFile, match=r"memory\.max: negative memory limit: '-5'"):
        parse_memory_limit("-5\n", source="memory.max")
