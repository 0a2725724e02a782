"""Writes of logical cgroup resources, mapped to each version's file and unit.

The qosmanager's resource executor sits on top of `write`. Callers speak v1 units
(CFS quota/period/burst in µs, cpu.shares, bytes); on v2 the mapping converts:

    CPU_QUOTA, CPU_PERIOD  cpu.cfs_quota_us / cpu.cfs_period_us  ->  cpu.max "<quota|max> <period>"
    CPU_BURST              cpu.cfs_burst_us                      ->  cpu.max.burst
    CPU_SHARES             cpu.shares                            ->  cpu.weight (shares_to_weight)
    CPU_IDLE               cpu.idle                              ->  cpu.idle (0 or 1, Linux >= 5.15)
    MEMORY_LIMIT           memory.limit_in_bytes                 ->  memory.max
    MEMORY_MIN/LOW/HIGH    (none on v1: Unsupported)             ->  memory.min / .low / .high

Every write is read-before-write: the current content is decoded and compared with
the decoded new content, and an equal value is not written. That keeps the kernel
from redoing work on every reconcile and makes "no-op" visible to the caller.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from cgroups import errors, fileio, parse
from cgroups.fs import CgroupFS, RelDir
from cgroups.model import CgroupVersion, CpuMax

ResourceValue = int | frozenset[int] | None


class Resource(enum.Enum):
    """A logical cgroup knob; see the module docstring for values and units."""

    CPU_QUOTA = "cpu_quota"  # µs per period, None = unlimited
    CPU_PERIOD = "cpu_period"  # µs
    CPU_BURST = "cpu_burst"  # µs
    CPU_SHARES = "cpu_shares"  # v1 shares, [2, 262144]
    CPU_IDLE = "cpu_idle"  # 1: the group is SCHED_IDLE (kernel refuses its shares/weight), else 0
    CPUSET_CPUS = "cpuset_cpus"  # frozenset of CPU numbers
    MEMORY_MIN = "memory_min"  # bytes, None = max
    MEMORY_LOW = "memory_low"  # bytes, None = max
    MEMORY_HIGH = "memory_high"  # bytes, None = max
    MEMORY_LIMIT = "memory_limit"  # bytes, None = unlimited


@dataclass(frozen=True, slots=True)
class _Spec:
    """How one resource lives in one file: encode(value, current text) and decode."""

    filename: str
    encode: Callable[[Resource, ResourceValue, str], str]
    decode: Callable[[str, str], ResourceValue]


def _int(resource: Resource, value: ResourceValue) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{resource.name} takes an int, not {value!r}")
    return value


def _optional_int(resource: Resource, value: ResourceValue) -> int | None:
    return None if value is None else _int(resource, value)


def _encode_int(resource: Resource, value: ResourceValue, _current: str) -> str:
    return str(_int(resource, value))


def _decode_int(text: str, source: str) -> int:
    return parse.parse_int(text, source=source)


def _encode_v1_optional(resource: Resource, value: ResourceValue, _current: str) -> str:
    number = _optional_int(resource, value)
    return "-1" if number is None else str(number)


def _encode_v2_optional(resource: Resource, value: ResourceValue, _current: str) -> str:
    number = _optional_int(resource, value)
    return "max" if number is None else str(number)


def _decode_memory(text: str, source: str) -> int | None:
    # The kernel rounds memory limits down to the page size, so a value that is not
    # page aligned reads back different and is rewritten each time; pass aligned values.
    return parse.parse_memory_limit(text, source=source)


def _decode_cfs_quota(text: str, source: str) -> int | None:
    return parse.parse_cfs_quota(text, source=source)


def _encode_cpuset(resource: Resource, value: ResourceValue, _current: str) -> str:
    if not isinstance(value, frozenset):
        raise TypeError(f"{resource.name} takes a frozenset of CPU numbers, not {value!r}")
    return parse.format_cpuset(value)


def _decode_cpuset(text: str, source: str) -> frozenset[int]:
    return parse.parse_cpuset(text, source=source)


# cpu.max holds quota and period together: each write keeps the half it does not set.
def _encode_cpu_max_quota(resource: Resource, value: ResourceValue, current: str) -> str:
    period = parse.parse_cpu_max(current).period_us
    return parse.format_cpu_max(CpuMax(quota_us=_optional_int(resource, value), period_us=period))


def _encode_cpu_max_period(resource: Resource, value: ResourceValue, current: str) -> str:
    quota = parse.parse_cpu_max(current).quota_us
    return parse.format_cpu_max(CpuMax(quota_us=quota, period_us=_int(resource, value)))


def _decode_cpu_max_quota(text: str, source: str) -> int | None:
    return parse.parse_cpu_max(text, source=source).quota_us


def _decode_cpu_max_period(text: str, source: str) -> int:
    return parse.parse_cpu_max(text, source=source).period_us


def _encode_weight(resource: Resource, value: ResourceValue, _current: str) -> str:
    return str(parse.shares_to_weight(_int(resource, value)))


def _decode_weight(text: str, source: str) -> int:
    return parse.weight_to_shares(parse.parse_int(text, source=source))


_SPECS: dict[CgroupVersion, dict[Resource, _Spec]] = {
    CgroupVersion.V1: {
        Resource.CPU_QUOTA: _Spec("cpu.cfs_quota_us", _encode_v1_optional, _decode_cfs_quota),
        Resource.CPU_PERIOD: _Spec("cpu.cfs_period_us", _encode_int, _decode_int),
        Resource.CPU_BURST: _Spec("cpu.cfs_burst_us", _encode_int, _decode_int),
        Resource.CPU_SHARES: _Spec("cpu.shares", _encode_int, _decode_int),
        Resource.CPU_IDLE: _Spec("cpu.idle", _encode_int, _decode_int),
        Resource.CPUSET_CPUS: _Spec("cpuset.cpus", _encode_cpuset, _decode_cpuset),
        Resource.MEMORY_LIMIT: _Spec("memory.limit_in_bytes", _encode_v1_optional, _decode_memory),
    },
    CgroupVersion.V2: {
        Resource.CPU_QUOTA: _Spec("cpu.max", _encode_cpu_max_quota, _decode_cpu_max_quota),
        Resource.CPU_PERIOD: _Spec("cpu.max", _encode_cpu_max_period, _decode_cpu_max_period),
        Resource.CPU_BURST: _Spec("cpu.max.burst", _encode_int, _decode_int),
        Resource.CPU_SHARES: _Spec("cpu.weight", _encode_weight, _decode_weight),
        Resource.CPU_IDLE: _Spec("cpu.idle", _encode_int, _decode_int),
        Resource.CPUSET_CPUS: _Spec("cpuset.cpus", _encode_cpuset, _decode_cpuset),
        Resource.MEMORY_MIN: _Spec("memory.min", _encode_v2_optional, _decode_memory),
        Resource.MEMORY_LOW: _Spec("memory.low", _encode_v2_optional, _decode_memory),
        Resource.MEMORY_HIGH: _Spec("memory.high", _encode_v2_optional, _decode_memory),
        Resource.MEMORY_LIMIT: _Spec("memory.max", _encode_v2_optional, _decode_memory),
    },
}


def _spec(version: CgroupVersion, resource: Resource) -> _Spec:
    spec = _SPECS[version].get(resource)
    if spec is None:
        raise errors.Unsupported(f"{resource.name} has no cgroup {version.value} file")
    return spec


def resource_file(version: CgroupVersion, resource: Resource) -> str:
    """The interface file holding `resource` on `version`; raises Unsupported."""
    return _spec(version, resource).filename


def _read_current(fs: CgroupFS, rel_dir: RelDir, resource: Resource) -> tuple[_Spec, str, str]:
    spec = _spec(fs.version, resource)
    path = fs.path(rel_dir, spec.filename)
    try:
        return spec, fileio.read_interface(path), str(path)
    except errors.CgroupGone as err:
        if path.parent.is_dir():
            # the cgroup is there, the file is not: an older kernel (cfs burst < 5.14)
            # or a controller not enabled for this v2 cgroup
            raise errors.Unsupported(f"{path}: no such file on this host") from err
        raise


def read(fs: CgroupFS, rel_dir: RelDir, resource: Resource) -> ResourceValue:
    """The current value of `resource`, in the logical units `write` takes."""
    spec, text, source = _read_current(fs, rel_dir, resource)
    return spec.decode(text, source)


def write(fs: CgroupFS, rel_dir: RelDir, resource: Resource, value: ResourceValue) -> bool:
    """Set `resource` of the cgroup at `rel_dir`; returns False when already equal.

    Raises Unsupported (no such file on this version/kernel), CgroupGone,
    AccessDenied, WriteRejected (the kernel refused the value), TypeError/ValueError
    for a value of the wrong type or range.
    """
    spec, current, source = _read_current(fs, rel_dir, resource)
    old = spec.decode(current, source)  # first, so a bad file is named by its path
    new = spec.encode(resource, value, current)
    if spec.decode(new, "new value") == old:
        return False
    fileio.write_text(fs.path(rel_dir, spec.filename), new)
    return True
