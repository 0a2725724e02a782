"""Pure parsers for cgroup interface files: text in, typed values out.

Each parser takes the file's text and a `source` naming the file (the readers pass
the real path) so a `MalformedFile` says which file and which line were bad. File
formats follow the kernel's Documentation/admin-guide/cgroup-v1/*.rst and
cgroup-v2.rst; quirks are cited where they are handled.
"""

from __future__ import annotations

from collections.abc import Iterable

from cgroups.errors import MalformedFile
from cgroups.model import (
    CgroupVersion,
    CpuMax,
    CpuThrottling,
    CpuUsage,
    MemoryStat,
    Pressure,
    PressureLine,
)

# v1 reports "no limit" as PAGE_COUNTER_MAX pages in bytes: LONG_MAX rounded down to
# the page size (9223372036854771712 with 4 KiB pages, less with 64 KiB pages).
# Anything this close to LONG_MAX is the kernel's "unlimited", not a real limit.
V1_UNLIMITED_FLOOR = (1 << 63) - (1 << 20)


def _int(token: str, *, source: str, line: str) -> int:
    try:
        return int(token)
    except ValueError as err:
        raise MalformedFile(source, line, f"{token!r} is not an integer") from err


def _only_line(text: str, *, source: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) != 1:
        raise MalformedFile(source, text[:80], f"expected one line, got {len(lines)}")
    return lines[0].strip()


def parse_int(text: str, *, source: str) -> int:
    """Parse a single-integer file such as `cpu.shares` or `memory.current`."""
    line = _only_line(text, source=source)
    return _int(line, source=source, line=line)


def parse_flat_keyed(text: str, *, source: str) -> dict[str, int]:
    """Parse a flat keyed file (`key value` per line): cpu.stat, memory.stat."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2:
            raise MalformedFile(source, line, "expected 'key value'")
        values[parts[0]] = _int(parts[1], source=source, line=line)
    return values


def _require(values: dict[str, int], keys: Iterable[str], *, source: str) -> list[int]:
    missing = [key for key in keys if key not in values]
    if missing:
        raise MalformedFile(source, "", f"missing key(s) {', '.join(missing)}")
    return [values[key] for key in keys]


def parse_cpuacct_usage(text: str, *, source: str = "cpuacct.usage") -> CpuUsage:
    """v1 `cpuacct.usage`: total CPU time in ns."""
    return CpuUsage(usage_ns=parse_int(text, source=source))


def parse_cpu_stat_usage(text: str, *, source: str = "cpu.stat") -> CpuUsage:
    """v2 `cpu.stat` `usage_usec`, scaled to ns so both versions share one unit."""
    (usage_us,) = _require(parse_flat_keyed(text, source=source), ["usage_usec"], source=source)
    return CpuUsage(usage_ns=usage_us * 1000)


_THROTTLE_KEYS = {
    CgroupVersion.V1: ("nr_periods", "nr_throttled", "throttled_time"),
    CgroupVersion.V2: ("nr_periods", "nr_throttled", "throttled_usec"),
}


def parse_cpu_throttling(
    text: str, version: CgroupVersion, *, source: str = "cpu.stat"
) -> CpuThrottling | None:
    """`cpu.stat` bandwidth counters; v1 `throttled_time` is ns, v2 `throttled_usec` µs.

    Returns None when the file carries none of them: a v2 cgroup without the cpu
    controller enabled (the root, for one) reports usage only.
    """
    values = parse_flat_keyed(text, source=source)
    keys = _THROTTLE_KEYS[version]
    if not any(key in values for key in keys):
        return None
    periods, throttled, throttled_time = _require(values, keys, source=source)
    scale = 1 if version is CgroupVersion.V1 else 1000
    return CpuThrottling(
        nr_periods=periods, nr_throttled=throttled, throttled_ns=throttled_time * scale
    )


# MemoryStat field -> memory.stat key, per version. v1 uses the hierarchical total_*
# keys so a pod's numbers include its containers, as the v2 keys always do.
_MEMORY_KEYS = {
    CgroupVersion.V1: {
        "inactive_anon": "total_inactive_anon",
        "active_anon": "total_active_anon",
        "unevictable": "total_unevictable",
        "inactive_file": "total_inactive_file",
        "active_file": "total_active_file",
        "cache": "total_cache",
        "rss": "total_rss",
    },
    CgroupVersion.V2: {
        "inactive_anon": "inactive_anon",
        "active_anon": "active_anon",
        "unevictable": "unevictable",
        "inactive_file": "inactive_file",
        "active_file": "active_file",
        "cache": "file",
        "rss": "anon",
    },
}


def parse_memory_stat(
    text: str, version: CgroupVersion, *, source: str = "memory.stat"
) -> MemoryStat:
    """`memory.stat` of either version into one MemoryStat (bytes)."""
    values = parse_flat_keyed(text, source=source)
    keys = _MEMORY_KEYS[version]
    found = _require(values, keys.values(), source=source)
    return MemoryStat(**dict(zip(keys, found, strict=True)))


def parse_memory_limit(text: str, *, source: str) -> int | None:
    """A memory limit in bytes, None when unlimited.

    Accepts v2 `memory.max`/`.high`/`.low`/`.min` ("max" is unlimited) and v1
    `memory.limit_in_bytes` (a value near LONG_MAX is unlimited; "-1" is what one
    writes to ask for it, accepted here so a written value round-trips).
    """
    line = _only_line(text, source=source)
    if line == "max":
        return None
    value = _int(line, source=source, line=line)
    if value == -1 or value >= V1_UNLIMITED_FLOOR:
        return None
    if value < 0:
        raise MalformedFile(source, line, "negative memory limit")
    return value


def parse_cfs_quota(text: str, *, source: str = "cpu.cfs_quota_us") -> int | None:
    """v1 `cpu.cfs_quota_us` in µs; -1 (no bandwidth limit) becomes None."""
    value = parse_int(text, source=source)
    return None if value < 0 else value


def parse_cpu_max(text: str, *, source: str = "cpu.max") -> CpuMax:
    """v2 `cpu.max`: `$MAX $PERIOD`, where `$MAX` is "max" or a quota in µs."""
    line = _only_line(text, source=source)
    parts = line.split()
    if len(parts) != 2:
        raise MalformedFile(source, line, "expected '<quota|max> <period>'")
    quota = None if parts[0] == "max" else _int(parts[0], source=source, line=line)
    return CpuMax(quota_us=quota, period_us=_int(parts[1], source=source, line=line))


def format_cpu_max(cpu_max: CpuMax) -> str:
    """Render a CpuMax as v2 `cpu.max` content."""
    quota = "max" if cpu_max.quota_us is None else str(cpu_max.quota_us)
    return f"{quota} {cpu_max.period_us}"


# The kernel's NR_CPUS tops out at 8192 (x86 MAXSMP; arm64 allows 4096); a CPU
# number above this is no real cpuset, and expanding "0-99999999999" would
# exhaust memory, so it is a malformed file.
MAX_CPU_ID = 65535


def parse_cpuset(text: str, *, source: str = "cpuset.cpus") -> frozenset[int]:
    """A cpuset list such as "0-3,8,10-11"; an empty file is the empty set."""
    line = text.strip()
    cpus: set[int] = set()
    if not line:
        return frozenset()
    for token in line.split(","):
        first, sep, last = token.partition("-")
        low = _int(first.strip(), source=source, line=line)
        high = _int(last.strip(), source=source, line=line) if sep else low
        if low < 0 or high < low:
            raise MalformedFile(source, line, f"bad range {token!r}")
        if high > MAX_CPU_ID:
            raise MalformedFile(source, line, f"CPU number above {MAX_CPU_ID} in {token!r}")
        cpus.update(range(low, high + 1))
    return frozenset(cpus)


def format_cpuset(cpus: Iterable[int]) -> str:
    """Render CPUs the way the kernel prints them: sorted, runs collapsed ("0-3,8")."""
    ranges: list[str] = []
    ordered = sorted(set(cpus))
    start = 0
    for i, cpu in enumerate(ordered):
        if cpu < 0:
            raise ValueError(f"negative CPU number {cpu}")
        if i + 1 < len(ordered) and ordered[i + 1] == cpu + 1:
            continue
        first = ordered[start]
        ranges.append(str(first) if first == cpu else f"{first}-{cpu}")
        start = i + 1
    return ",".join(ranges)


def _pressure_line(line: str, *, source: str) -> tuple[str, PressureLine]:
    kind, *fields = line.split()
    pairs = dict(field.partition("=")[::2] for field in fields)
    try:
        return kind, PressureLine(
            avg10=float(pairs["avg10"]),
            avg60=float(pairs["avg60"]),
            avg300=float(pairs["avg300"]),
            total_us=int(pairs["total"]),
        )
    except (KeyError, ValueError) as err:
        raise MalformedFile(source, line, "expected 'avg10= avg60= avg300= total='") from err


def parse_pressure(text: str, *, source: str) -> Pressure:
    """A PSI file (`cpu.pressure`, ...): a `some` line and, usually, a `full` line."""
    lines: dict[str, PressureLine] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        kind, parsed = _pressure_line(line, source=source)
        if kind not in ("some", "full"):
            raise MalformedFile(source, line, f"unknown pressure kind {kind!r}")
        lines[kind] = parsed
    if "some" not in lines:
        raise MalformedFile(source, text[:80], "no 'some' line")
    return Pressure(some=lines["some"], full=lines.get("full"))


# cpu.shares (v1) spans [2, 262144], cpu.weight (v2) spans [1, 10000].
SHARES_MIN, SHARES_MAX = 2, 262144
WEIGHT_MIN, WEIGHT_MAX = 1, 10000


def shares_to_weight(shares: int) -> int:
    """v1 cpu.shares -> v2 cpu.weight, the kubelet/runc mapping (KEP-2254).

    weight = 1 + ((shares - 2) * 9999) // 262142; 1024 shares -> weight 39.
    """
    if not SHARES_MIN <= shares <= SHARES_MAX:
        raise ValueError(f"cpu.shares {shares} outside [{SHARES_MIN}, {SHARES_MAX}]")
    return 1 + ((shares - 2) * 9999) // 262142


def weight_to_shares(weight: int) -> int:
    """v2 cpu.weight -> v1 cpu.shares: the smallest shares mapping back to `weight`.

    shares = 2 + ceil((weight - 1) * 262142 / 9999); 39 -> 999, 100 -> 2598.
    koordlet and KEP-2254 round down instead, which is up to one share lower and
    does not survive the trip back (39 -> 998 -> 38); rounding up does, so a value
    read from cpu.weight and written back is a no-op rather than a drift.
    """
    if not WEIGHT_MIN <= weight <= WEIGHT_MAX:
        raise ValueError(f"cpu.weight {weight} outside [{WEIGHT_MIN}, {WEIGHT_MAX}]")
    return 2 - (-(weight - 1) * 262142 // 9999)
