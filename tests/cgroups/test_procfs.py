"""Parsing and reading /proc: node CPU ticks, MemAvailable, per-pid stat and cgroup."""

from pathlib import Path, PurePosixPath
from textwrap import dedent

import pytest

from cgroups import (
    CpuTimes,
    MalformedFile,
    MemInfo,
    ProcCgroup,
    ProcessGone,
    ProcFS,
    cgroup_path_for,
    parse_boot_time,
    parse_meminfo,
    parse_pid_cgroup,
    parse_pid_stat,
    parse_proc_stat,
)
from tests.cgroupfs_builder import write_meminfo, write_pid, write_proc_stat

PROC_STAT = dedent("""\
    cpu  4705 356 584 3699 23 0 27 5 0 0
    cpu0 1393 280 1 100 10 0 10 2 0 0
    intr 1462898 0 0
    btime 1700000000
""")


def test_aggregate_cpu_line() -> None:
    """The first 'cpu' line gives the eight tick counters; guest is ignored."""
    times = parse_proc_stat(PROC_STAT)
    assert times == CpuTimes(
        user=4705, nice=356, system=584, idle=3699, iowait=23, irq=0, softirq=27, steal=5
    )
    assert times.busy == 4705 + 356 + 584 + 0 + 27
    assert times.total == times.busy + 3699 + 23 + 5


def test_boot_time() -> None:
    """btime is seconds since the epoch."""
    assert parse_boot_time(PROC_STAT) == 1_700_000_000


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("cpu0 1 2 3 4 5 6 7 8\n", "no aggregate 'cpu' line", id="no-cpu"),
        pytest.param("cpu  1 2 3\n", "too few fields in the cpu line: 'cpu  1 2 3'", id="short"),
        pytest.param("cpu  1 2 x 4 5 6 7 8\n", "'x' is not an integer", id="not-int"),
    ],
)
def test_malformed_proc_stat(text: str, message: str) -> None:
    """A bad /proc/stat names the file and line."""
    with pytest.raises(MalformedFile, match=rf"^/proc/stat: {message}"):
        parse_proc_stat(text)


def test_meminfo_in_bytes() -> None:
    """MemTotal and MemAvailable are kB in the file, bytes in MemInfo."""
    text = "MemTotal:  8000 kB\nMemFree:  100 kB\nMemAvailable:  6000 kB\nHugePages_Total: 0\n"
    info = parse_meminfo(text)
    assert info == MemInfo(total_bytes=8000 * 1024, available_bytes=6000 * 1024)
    assert info.used_bytes == 2000 * 1024


def test_meminfo_without_memavailable() -> None:
    """Kernels before 3.14 lack MemAvailable: reported, not guessed."""
    with pytest.raises(MalformedFile, match="missing MemAvailable"):
        parse_meminfo("MemTotal: 8000 kB\n")


def test_meminfo_bad_unit() -> None:
    """A MemTotal not in kB is malformed, naming the line."""
    with pytest.raises(MalformedFile, match="'MemTotal: 8000 MB'"):
        parse_meminfo("MemTotal: 8000 MB\n")


def test_pid_stat_with_spaces_and_parens_in_comm() -> None:
    """comm may contain ') (' and spaces; fields are counted after the last ')'."""
    rest = "S 1 2 3 0 -1 4194304 100 0 0 0 250 75 0 0 20 0 1 0 98765 1000 10"
    stat = parse_pid_stat(f"4242 (evil) (name x) {rest}\n")
    assert (stat.pid, stat.comm) == (4242, "evil) (name x")
    assert (stat.utime, stat.stime, stat.start_ticks, stat.cpu_ticks) == (250, 75, 98765, 325)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("4242 comm S 1\n", "no '\\(comm\\)' field", id="no-parens"),
        pytest.param("4242 (c) S 1 2\n", "too few fields", id="short"),
    ],
)
def test_malformed_pid_stat(text: str, message: str) -> None:
    """A truncated stat line is malformed."""
    with pytest.raises(MalformedFile, match=message):
        parse_pid_stat(text)


def test_pid_cgroup_v1_and_v2_lines() -> None:
    """v1 lines carry controllers; the v2 line is 0::/path; paths may hold ':'."""
    text = dedent("""\
        9:name=systemd:/kubepods.slice/x.scope
        4:cpu,cpuacct:/kubepods/burstable/pod1/abc
        0::/weird:path
    """)
    entries = parse_pid_cgroup(text)
    assert entries[1] == ProcCgroup(
        hierarchy_id=4,
        controllers=("cpu", "cpuacct"),
        path=PurePosixPath("/kubepods/burstable/pod1/abc"),
    )
    assert cgroup_path_for(entries, "cpuacct") == PurePosixPath("/kubepods/burstable/pod1/abc")
    assert cgroup_path_for(entries, "name=systemd") == PurePosixPath("/kubepods.slice/x.scope")
    assert cgroup_path_for(entries, "") == PurePosixPath("/weird:path")
    assert cgroup_path_for(entries, "memory") is None


def test_malformed_pid_cgroup() -> None:
    """A line without three colon-separated parts is malformed."""
    with pytest.raises(MalformedFile, match="expected 'id:controllers:/path': '4:cpu'"):
        parse_pid_cgroup("4:cpu\n")


def test_procfs_reads_an_injected_root(tmp_path: Path) -> None:
    """ProcFS reads every file under its root, never the real /proc."""
    write_proc_stat(tmp_path, user=300, system=100, idle=600, btime=1_600_000_000)
    write_meminfo(tmp_path, total_kb=1000, available_kb=250)
    write_pid(tmp_path, 77, utime=40, stime=10, start_ticks=500, cgroup="0::/kubepods/pod1/c\n")
    proc = ProcFS(tmp_path, clock_ticks=100)
    assert proc.read_cpu_times().busy == 400
    assert proc.read_boot_time() == 1_600_000_000
    assert proc.read_meminfo().used_bytes == 750 * 1024
    assert proc.read_pid_stat(77).cpu_ticks == 50
    assert cgroup_path_for(proc.read_pid_cgroups(77), "") == PurePosixPath("/kubepods/pod1/c")
    assert proc.ticks_to_seconds(250) == 2.5
    assert proc.process_start_time(77, boot_time=1_600_000_000) == 1_600_000_005.0


def test_exited_process_is_process_gone(tmp_path: Path) -> None:
    """A pid without a /proc entry raises ProcessGone."""
    proc = ProcFS(tmp_path, clock_ticks=100)
    with pytest.raises(ProcessGone, match="process gone"):
        proc.read_pid_stat(99999)
    with pytest.raises(ProcessGone):
        proc.read_pid_cgroups(99999)


def test_clock_ticks_default_to_sysconf(tmp_path: Path) -> None:
    """Without an injected value USER_HZ comes from sysconf (100 on Linux)."""
    assert ProcFS(tmp_path).clock_ticks > 0
