"""Readers of /proc where psutil does not serve: aggregate CPU ticks, MemAvailable,
per-pid CPU ticks and start time, and per-pid cgroup membership, all under an
injected root (the DaemonSet mounts the host's /proc at /host/proc).

Formats follow proc(5). Ticks are USER_HZ (sysconf SC_CLK_TCK), injectable so tests
and hosts with unusual values agree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from cgroups import errors, fileio


def _default_clock_ticks() -> int:
    return os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class CpuTimes:
    """The aggregate `cpu` line of /proc/stat, in USER_HZ ticks since boot.

    guest/guest_nice are left out: the kernel already counts them in user/nice.
    """

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int

    @property
    def busy(self) -> int:
        """Ticks doing work: user+nice+system+irq+softirq (docs/design.md, "Usage semantics")."""
        return self.user + self.nice + self.system + self.irq + self.softirq

    @property
    def total(self) -> int:
        """All ticks, busy or not, including steal."""
        return self.busy + self.idle + self.iowait + self.steal


@dataclass(frozen=True, slots=True)
class MemInfo:
    """/proc/meminfo totals in bytes."""

    total_bytes: int
    available_bytes: int

    @property
    def used_bytes(self) -> int:
        """MemTotal - MemAvailable, node memory (docs/design.md, "Usage semantics")."""
        return self.total_bytes - self.available_bytes


@dataclass(frozen=True, slots=True)
class PidStat:
    """The /proc/<pid>/stat fields nodeqos uses; times in USER_HZ ticks."""

    pid: int
    comm: str
    utime: int
    stime: int
    start_ticks: int  # since boot; with the pid it tells a reused pid apart

    @property
    def cpu_ticks(self) -> int:
        """User plus system time."""
        return self.utime + self.stime


@dataclass(frozen=True, slots=True)
class ProcCgroup:
    """One line of /proc/<pid>/cgroup; v2's line has id 0 and no controllers."""

    hierarchy_id: int
    controllers: tuple[str, ...]
    path: PurePosixPath


_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def _int(token: str, *, source: str, line: str) -> int:
    try:
        return int(token)
    except ValueError as err:
        raise errors.MalformedFile(source, line, f"{token!r} is not an integer") from err


def parse_proc_stat(text: str, *, source: str = "/proc/stat") -> CpuTimes:
    """The aggregate `cpu ` line of /proc/stat."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            if len(parts) < 1 + len(_CPU_FIELDS):
                raise errors.MalformedFile(source, line, "too few fields in the cpu line")
            values = [_int(token, source=source, line=line) for token in parts[1:9]]
            return CpuTimes(*values)
    raise errors.MalformedFile(source, text[:80], "no aggregate 'cpu' line")


def parse_boot_time(text: str, *, source: str = "/proc/stat") -> int:
    """`btime` of /proc/stat: boot time in seconds since the epoch."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "btime":
            if len(parts) != 2:
                raise errors.MalformedFile(source, line, "expected 'btime <seconds>'")
            return _int(parts[1], source=source, line=line)
    raise errors.MalformedFile(source, text[:80], "no 'btime' line")


def parse_meminfo(text: str, *, source: str = "/proc/meminfo") -> MemInfo:
    """MemTotal and MemAvailable (reported in kB, returned in bytes)."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        if key not in ("MemTotal", "MemAvailable"):
            continue
        parts = rest.split()
        if not sep or len(parts) != 2 or parts[1] != "kB":
            raise errors.MalformedFile(source, line, "expected '<key>: <n> kB'")
        found[key] = _int(parts[0], source=source, line=line) * 1024
    missing = [key for key in ("MemTotal", "MemAvailable") if key not in found]
    if missing:
        # MemAvailable appeared in Linux 3.14; older kernels are not supported
        raise errors.MalformedFile(source, "", f"missing {', '.join(missing)}")
    return MemInfo(total_bytes=found["MemTotal"], available_bytes=found["MemAvailable"])


def parse_pid_stat(text: str, *, source: str = "stat") -> PidStat:
    """/proc/<pid>/stat. `comm` may hold spaces and parentheses, so split at the last ')'."""
    line = text.strip()
    open_paren, close_paren = line.find("("), line.rfind(")")
    if open_paren < 0 or close_paren < open_paren:
        raise errors.MalformedFile(source, line, "no '(comm)' field")
    rest = line[close_paren + 1 :].split()
    # rest[0] is field 3 (state); proc(5) numbers utime 14, stime 15, starttime 22
    if len(rest) < 20:
        raise errors.MalformedFile(source, line, "too few fields")
    return PidStat(
        pid=_int(line[:open_paren].strip(), source=source, line=line),
        comm=line[open_paren + 1 : close_paren],
        utime=_int(rest[11], source=source, line=line),
        stime=_int(rest[12], source=source, line=line),
        start_ticks=_int(rest[19], source=source, line=line),
    )


def parse_pid_cgroup(text: str, *, source: str = "cgroup") -> tuple[ProcCgroup, ...]:
    """/proc/<pid>/cgroup: `id:controllers:path` lines, v1 and v2 (`0::/path`)."""
    entries: list[ProcCgroup] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split(":", 2)  # the path itself may contain ':'
        if len(parts) != 3 or not parts[2].startswith("/"):
            raise errors.MalformedFile(source, line, "expected 'id:controllers:/path'")
        controllers = tuple(c for c in parts[1].split(",") if c)
        entries.append(
            ProcCgroup(
                hierarchy_id=_int(parts[0], source=source, line=line),
                controllers=controllers,
                path=PurePosixPath(parts[2]),
            )
        )
    return tuple(entries)


def cgroup_path_for(entries: tuple[ProcCgroup, ...], controller: str) -> PurePosixPath | None:
    """The path of the hierarchy serving `controller`; "" picks the v2 unified line."""
    for entry in entries:
        if controller in entry.controllers or (
            not controller and entry.hierarchy_id == 0 and not entry.controllers
        ):
            return entry.path
    return None


@dataclass(frozen=True, slots=True)
class ProcFS:
    """A procfs mounted at `root`; `clock_ticks` is USER_HZ."""

    root: Path
    clock_ticks: int = field(default_factory=_default_clock_ticks)

    def _read(self, *parts: str, gone: type[errors.CgroupGone] = errors.CgroupGone) -> str:
        return fileio.read_text(self.root.joinpath(*parts), gone=gone)

    def read_cpu_times(self) -> CpuTimes:
        """Aggregate CPU ticks from /proc/stat."""
        return parse_proc_stat(self._read("stat"), source=str(self.root / "stat"))

    def read_boot_time(self) -> int:
        """Boot time, seconds since the epoch."""
        return parse_boot_time(self._read("stat"), source=str(self.root / "stat"))

    def read_meminfo(self) -> MemInfo:
        """MemTotal and MemAvailable in bytes."""
        return parse_meminfo(self._read("meminfo"), source=str(self.root / "meminfo"))

    def read_pid_stat(self, pid: int) -> PidStat:
        """/proc/<pid>/stat; raises ProcessGone when the process exited."""
        text = self._read(str(pid), "stat", gone=errors.ProcessGone)
        return parse_pid_stat(text, source=str(self.root / str(pid) / "stat"))

    def read_pid_cgroups(self, pid: int) -> tuple[ProcCgroup, ...]:
        """/proc/<pid>/cgroup; raises ProcessGone when the process exited."""
        text = self._read(str(pid), "cgroup", gone=errors.ProcessGone)
        return parse_pid_cgroup(text, source=str(self.root / str(pid) / "cgroup"))

    def ticks_to_seconds(self, ticks: int) -> float:
        """Convert USER_HZ ticks to seconds."""
        return ticks / self.clock_ticks

    def process_start_time(self, pid: int, *, boot_time: int) -> float:
        """When `pid` started, seconds since the epoch (`boot_time` from read_boot_time)."""
        return boot_time + self.ticks_to_seconds(self.read_pid_stat(pid).start_ticks)
