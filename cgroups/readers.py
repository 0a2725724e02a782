"""Typed readers of one cgroup's interface files, the same values on v1 and v2.

Each reader resolves the file through `CgroupFS`, reads it with `fileio` (which
turns OS errors into `CgroupGone`/`AccessDenied`) and hands the text to a pure
parser in `parse`. Collectors in the agent call these per pod and per container.
"""

from __future__ import annotations

from cgroups import fileio, parse
from cgroups.fs import CgroupFS, RelDir
from cgroups.model import (
    CgroupVersion,
    CpuMax,
    CpuThrottling,
    CpuUsage,
    MemoryStat,
    Pressure,
    PressureKind,
)

V1, V2 = CgroupVersion.V1, CgroupVersion.V2


def _read(fs: CgroupFS, rel_dir: RelDir, filename: str) -> tuple[str, str]:
    path = fs.path(rel_dir, filename)
    return fileio.read_interface(path), str(path)


def read_cpu_usage(fs: CgroupFS, rel_dir: RelDir) -> CpuUsage:
    """Cumulative CPU time: v1 `cpuacct.usage`, v2 `cpu.stat` usage_usec."""
    if fs.version is V1:
        text, source = _read(fs, rel_dir, "cpuacct.usage")
        return parse.parse_cpuacct_usage(text, source=source)
    text, source = _read(fs, rel_dir, "cpu.stat")
    return parse.parse_cpu_stat_usage(text, source=source)


def read_cpu_throttling(fs: CgroupFS, rel_dir: RelDir) -> CpuThrottling | None:
    """CFS throttling counters from `cpu.stat`; None without bandwidth accounting."""
    text, source = _read(fs, rel_dir, "cpu.stat")
    return parse.parse_cpu_throttling(text, fs.version, source=source)


def read_cpu_max(fs: CgroupFS, rel_dir: RelDir) -> CpuMax:
    """CFS quota and period: v1 `cpu.cfs_quota_us` + `cpu.cfs_period_us`, v2 `cpu.max`."""
    if fs.version is V2:
        text, source = _read(fs, rel_dir, "cpu.max")
        return parse.parse_cpu_max(text, source=source)
    quota_text, quota_source = _read(fs, rel_dir, "cpu.cfs_quota_us")
    period_text, period_source = _read(fs, rel_dir, "cpu.cfs_period_us")
    return CpuMax(
        quota_us=parse.parse_cfs_quota(quota_text, source=quota_source),
        period_us=parse.parse_int(period_text, source=period_source),
    )


def read_cpu_burst_us(fs: CgroupFS, rel_dir: RelDir) -> int | None:
    """CFS burst in µs (v1 `cpu.cfs_burst_us`, v2 `cpu.max.burst`); None before 5.14."""
    path = fs.path(rel_dir, "cpu.cfs_burst_us" if fs.version is V1 else "cpu.max.burst")
    text = fileio.read_optional(path)
    return None if text is None else parse.parse_int(text, source=str(path))


def read_cpu_shares(fs: CgroupFS, rel_dir: RelDir) -> int:
    """CPU shares; on v2 `cpu.weight` via `parse.weight_to_shares` (the smallest match)."""
    if fs.version is V1:
        text, source = _read(fs, rel_dir, "cpu.shares")
        return parse.parse_int(text, source=source)
    text, source = _read(fs, rel_dir, "cpu.weight")
    return parse.weight_to_shares(parse.parse_int(text, source=source))


def read_cpuset_cpus(fs: CgroupFS, rel_dir: RelDir, *, effective: bool = False) -> frozenset[int]:
    """Allowed CPUs: `cpuset.cpus`, or the effective set the kernel enforces.

    The effective file is `cpuset.effective_cpus` on v1, `cpuset.cpus.effective` on v2.
    """
    if not effective:
        filename = "cpuset.cpus"
    else:
        filename = "cpuset.effective_cpus" if fs.version is V1 else "cpuset.cpus.effective"
    text, source = _read(fs, rel_dir, filename)
    return parse.parse_cpuset(text, source=source)


def read_memory_stat(fs: CgroupFS, rel_dir: RelDir) -> MemoryStat:
    """`memory.stat`, hierarchical (v1 total_* keys)."""
    text, source = _read(fs, rel_dir, "memory.stat")
    return parse.parse_memory_stat(text, fs.version, source=source)


def read_memory_usage_bytes(fs: CgroupFS, rel_dir: RelDir) -> int:
    """Charged memory including page cache: v1 `memory.usage_in_bytes`, v2 `memory.current`."""
    filename = "memory.usage_in_bytes" if fs.version is V1 else "memory.current"
    text, source = _read(fs, rel_dir, filename)
    return parse.parse_int(text, source=source)


def read_memory_limit_bytes(fs: CgroupFS, rel_dir: RelDir) -> int | None:
    """Hard memory limit, None when unlimited: v1 `memory.limit_in_bytes`, v2 `memory.max`."""
    filename = "memory.limit_in_bytes" if fs.version is V1 else "memory.max"
    text, source = _read(fs, rel_dir, filename)
    return parse.parse_memory_limit(text, source=source)


def read_pressure(fs: CgroupFS, rel_dir: RelDir, kind: PressureKind) -> Pressure | None:
    """A PSI file; None when the kernel does not provide it (no PSI, v1 without psi_v1)."""
    path = fs.path(rel_dir, kind.value)
    text = fileio.read_optional(path)
    return None if text is None else parse.parse_pressure(text, source=str(path))
