"""The collectors' hot path: read a small cgroup file and pick out a few counters.

`cgroups.readers` resolve a path per call and parse every key of a file into a
dict of ints; that is right for one-off reads but costs ~22 us for a v2
`memory.stat` of 50 keys, and a 250-pod node reads 750 of them a second. Here
the paths are resolved once per pod (`agent.discovery`), files are read with
one `os.read` (or, kept open, one `os.pread`: `agent.collectors.filereader`),
and only the keys nodeqos uses are converted (~2 us). The values are the ones
`cgroups.parse_*` return for the same text (tests/agent check both on the same
files); any file-format question is settled in `cgroups`.

OS errors are translated where the read happens, as in `cgroups`: a vanished
file raises `cgroups.CgroupGone`, a refused one `cgroups.AccessDenied`.
"""

from __future__ import annotations

import errno
import os
from typing import NamedTuple

import cgroups

# Comfortably above any cgroup stat file (a v2 memory.stat is ~1.5 KiB).
READ_SIZE = 16384
# ENODEV: a file of a cgroup removed while open; ESRCH: a reaped /proc/<pid>.
_GONE_ERRNOS = frozenset({errno.ENOENT, errno.ENODEV, errno.ESRCH})
_DENIED_ERRNOS = frozenset({errno.EACCES, errno.EPERM})


def translate_os_error(err: OSError, path: str) -> cgroups.CgroupError:
    """The cgroups exception for an OSError met while reading `path` (raise it `from err`)."""
    if err.errno in _GONE_ERRNOS:
        return cgroups.CgroupGone(path)
    if err.errno in _DENIED_ERRNOS:
        return cgroups.AccessDenied(path)
    return cgroups.CgroupError(f"{path}: {err.strerror or err}")


def read_bytes(path: str) -> bytes:
    """The whole (small) file at `path`, with OS errors translated."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as err:
        raise translate_os_error(err, path) from err
    try:
        return os.read(fd, READ_SIZE)
    except OSError as err:
        raise translate_os_error(err, path) from err
    finally:
        os.close(fd)


def _int(value: bytes, path: str) -> int:
    try:
        return int(value)
    except ValueError as err:
        raise cgroups.MalformedFile(path, value.decode(errors="replace"), "not an integer") from err


def parse_single_int(data: bytes, path: str) -> int:
    """A one-number file such as v1 `cpuacct.usage`."""
    return _int(data.strip(), path)


class CpuCounters(NamedTuple):
    """Cumulative CPU counters of one cgroup; throttling is None without CFS bandwidth.

    A NamedTuple: 750 are made per round on a 250-pod node, at half a dataclass's cost.
    """

    usage_ns: int
    nr_periods: int | None
    nr_throttled: int | None


_USAGE_USEC = b"usage_usec"
_NR_PERIODS = b"nr_periods"
_NR_THROTTLED = b"nr_throttled"


# `cpu.stat` is a flat keyed file of under ten lines: its tokens alternate key
# and value, and looking keys up in the token list beats building a dict (~1 us
# against ~3 us a file).


def _after(tokens: list[bytes], key: bytes, path: str) -> int | None:
    """The value token following `key`, None when the key is absent."""
    try:
        at = tokens.index(key)
    except ValueError:
        return None
    if at + 1 >= len(tokens):
        raise cgroups.MalformedFile(path, key.decode(), "key without a value")
    return _int(tokens[at + 1], path)


def _throttling(tokens: list[bytes], path: str) -> tuple[int | None, int | None]:
    periods, throttled = _after(tokens, _NR_PERIODS, path), _after(tokens, _NR_THROTTLED, path)
    if periods is None or throttled is None:
        return None, None  # no CFS bandwidth accounting in this cgroup
    return periods, throttled


def parse_cpu_stat_v2(data: bytes, path: str) -> CpuCounters:
    """v2 `cpu.stat`: usage (scaled to ns, as cgroups does) and throttling."""
    tokens = data.split()
    usage = _after(tokens, _USAGE_USEC, path)
    if usage is None:
        raise cgroups.MalformedFile(path, "", "missing key(s) usage_usec")
    periods, throttled = _throttling(tokens, path)
    return CpuCounters(usage * 1000, periods, throttled)


def parse_cpu_stat_v1(
    usage_data: bytes, stat_data: bytes, usage_path: str, stat_path: str
) -> CpuCounters:
    """v1 `cpuacct.usage` (ns) plus the throttling counters of `cpu.stat`."""
    periods, throttled = _throttling(stat_data.split(), stat_path)
    return CpuCounters(parse_single_int(usage_data, usage_path), periods, throttled)


# The working-set keys of `memory.stat` per version (v1: hierarchical total_*),
# summed as `cgroups.MemoryStat.working_set_without_cache` sums them. The
# trailing space makes each a whole key ("active_anon " is not "active_anon_x").
_WORKING_SET_KEYS = {
    cgroups.CgroupVersion.V1: (
        b"total_inactive_anon ",
        b"total_active_anon ",
        b"total_unevictable ",
    ),
    cgroups.CgroupVersion.V2: (b"inactive_anon ", b"active_anon ", b"unevictable "),
}


def _line_value(data: bytes, key: bytes, path: str) -> int:
    """The value of the line starting with `key` (which ends in a space).

    A real memory.stat has ~50 lines and we need three: finding them is three
    times faster than splitting the whole file.
    """
    at = data.find(key)
    while at > 0 and data[at - 1] != 0x0A:  # inside another key ("inactive_anon")
        at = data.find(key, at + 1)
    if at < 0:
        raise cgroups.MalformedFile(path, "", f"missing key(s) {key.decode().strip()}")
    start = at + len(key)
    end = data.find(b"\n", start)
    return _int(data[start:] if end < 0 else data[start:end], path)


def parse_working_set(data: bytes, version: cgroups.CgroupVersion, path: str) -> int:
    """inactive_anon + active_anon + unevictable of `memory.stat`, in bytes."""
    inactive, active, unevictable = _WORKING_SET_KEYS[version]
    return (
        _line_value(data, inactive, path)
        + _line_value(data, active, path)
        + _line_value(data, unevictable, path)
    )
