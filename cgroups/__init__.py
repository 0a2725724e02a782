"""Host access: cgroup v1/v2 detection, layout, typed readers, a writer, /proc readers.

Other packages `import cgroups` and use the names below; the modules behind them
are internal. Typical use by the agent:

    fs = cgroups.detect(Path(args.cgroup_root))            # version + driver
    for pod in cgroups.scan_pods(fs):                      # standalone mode
        usage = cgroups.read_cpu_usage(fs, pod.rel_dir)    # CpuUsage(usage_ns=...)
    cgroups.write(fs, rel_dir, cgroups.Resource.CPU_QUOTA, 50_000)

Every error is a `CgroupError`; `CgroupGone` means the pod went away (skip it).
"""

from cgroups.detect import detect, detect_driver, detect_version
from cgroups.errors import (
    AccessDenied,
    CgroupError,
    CgroupGone,
    MalformedFile,
    ProcessGone,
    Unsupported,
    WriteRejected,
)
from cgroups.fs import CgroupFS, RelDir, v1_subsystem
from cgroups.layout import (
    container_dir,
    kubepods_dir,
    kubepods_root,
    parse_container_id,
    pod_dir,
)
from cgroups.model import (
    CgroupVersion,
    ContainerCgroup,
    ContainerID,
    ContainerRef,
    CpuMax,
    CpuThrottling,
    CpuUsage,
    Driver,
    MemoryStat,
    PodCgroup,
    PodUID,
    Pressure,
    PressureKind,
    PressureLine,
    QoSLevel,
    Runtime,
)
from cgroups.parse import (
    format_cpu_max,
    format_cpuset,
    parse_cfs_quota,
    parse_cpu_max,
    parse_cpu_stat_usage,
    parse_cpu_throttling,
    parse_cpuacct_usage,
    parse_cpuset,
    parse_memory_limit,
    parse_memory_stat,
    parse_pressure,
    shares_to_weight,
    weight_to_shares,
)
from cgroups.procfs import (
    CpuTimes,
    MemInfo,
    PidStat,
    ProcCgroup,
    ProcFS,
    cgroup_path_for,
    parse_boot_time,
    parse_meminfo,
    parse_pid_cgroup,
    parse_pid_stat,
    parse_proc_stat,
)
from cgroups.readers import (
    read_cpu_burst_us,
    read_cpu_max,
    read_cpu_shares,
    read_cpu_throttling,
    read_cpu_usage,
    read_cpuset_cpus,
    read_memory_limit_bytes,
    read_memory_stat,
    read_memory_usage_bytes,
    read_pressure,
)
from cgroups.scan import scan_pods
from cgroups.writer import Resource, ResourceValue, resource_file, write
from cgroups.writer import read as read_resource

__all__ = [
    "AccessDenied",
    "CgroupError",
    "CgroupFS",
    "CgroupGone",
    "CgroupVersion",
    "ContainerCgroup",
    "ContainerID",
    "ContainerRef",
    "CpuMax",
    "CpuThrottling",
    "CpuTimes",
    "CpuUsage",
    "Driver",
    "MalformedFile",
    "MemInfo",
    "MemoryStat",
    "PidStat",
    "PodCgroup",
    "PodUID",
    "Pressure",
    "PressureKind",
    "PressureLine",
    "ProcCgroup",
    "ProcFS",
    "ProcessGone",
    "QoSLevel",
    "RelDir",
    "Resource",
    "ResourceValue",
    "Runtime",
    "Unsupported",
    "WriteRejected",
    "cgroup_path_for",
    "container_dir",
    "detect",
    "detect_driver",
    "detect_version",
    "format_cpu_max",
    "format_cpuset",
    "kubepods_dir",
    "kubepods_root",
    "parse_boot_time",
    "parse_cfs_quota",
    "parse_container_id",
    "parse_cpu_max",
    "parse_cpu_stat_usage",
    "parse_cpu_throttling",
    "parse_cpuacct_usage",
    "parse_cpuset",
    "parse_meminfo",
    "parse_memory_limit",
    "parse_memory_stat",
    "parse_pid_cgroup",
    "parse_pid_stat",
    "parse_pressure",
    "parse_proc_stat",
    "pod_dir",
    "read_cpu_burst_us",
    "read_cpu_max",
    "read_cpu_shares",
    "read_cpu_throttling",
    "read_cpu_usage",
    "read_cpuset_cpus",
    "read_memory_limit_bytes",
    "read_memory_stat",
    "read_memory_usage_bytes",
    "read_pressure",
    "read_resource",
    "resource_file",
    "scan_pods",
    "shares_to_weight",
    "v1_subsystem",
    "weight_to_shares",
    "write",
]
