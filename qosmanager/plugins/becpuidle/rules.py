"""Which cgroups BECPUIdle marks idle, and what a pod's shares return to: pure functions.

`cpu.idle = 1` makes a cgroup SCHED_IDLE as a whole (Linux >= 5.15, cgroup v1
and v2; kernel `sched_group_set_idle`): its tasks run only when nothing else
on the CPU wants to, and the kernel then pins the group's weight to its
minimum and refuses every `cpu.shares` / `cpu.weight` write to it with EINVAL
(`sched_group_set_shares` returns -EINVAL for an idle group). Setting it back
to 0 resets the group's shares to 1024 (`NICE_0_LOAD`), whatever they were.

Hence where it may go: only a pod's own cgroup. Never the kubepods root nor a
QoS-class cgroup (`kubepods-besteffort.slice`, `kubepods/burstable`): kubelet
writes `cpu.shares` there at every start and refuses to start when the write
fails (Koordinator issue 2732, fixed by moving the flag to the pod level in
Koordinator PR 2986). Kubelet creates a pod cgroup once and leaves it alone;
containers below an idle pod stay normal groups, so their shares still split
the pod's time among them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath

import cgroups
from kube import classify
from qosmanager import states as qstates
from qosmanager.plugins.batchresource import rules as batchrules

IDLE = 1
NOT_IDLE = 0


def is_be(pod: qstates.PodMeta) -> bool:
    """Koordinator's BE filter (as BE suppression's): BE by label or by Kubernetes QoS."""
    return pod.qos is classify.KoordQOS.BE or pod.kube_qos is classify.KubeQOS.BEST_EFFORT


def qos_roots(driver: cgroups.Driver, kubelet_root: PurePosixPath) -> frozenset[PurePosixPath]:
    """The cgroups kubelet itself writes: the kubepods root and the QoS-class dirs."""
    return frozenset(
        kubelet_root / cgroups.kubepods_dir(driver, level) for level in cgroups.QoSLevel
    )


def is_pod_cgroup(
    rel_dir: PurePosixPath, driver: cgroups.Driver, kubelet_root: PurePosixPath
) -> bool:
    """`rel_dir` is a pod's own cgroup: a child of a QoS dir (or of the kubepods
    root, for Guaranteed pods) that is not itself the kubepods root or a QoS dir."""
    roots = qos_roots(driver, kubelet_root)
    return rel_dir not in roots and rel_dir.parent in roots


def idle_pods(pods: Iterable[qstates.PodMeta]) -> dict[PurePosixPath, qstates.PodMeta]:
    """Pod cgroup -> pod, for every active BE pod: the cgroups to hold at cpu.idle = 1."""
    return {pod.cgroup_dir: pod for pod in pods if pod.is_active and is_be(pod)}


def kubelet_shares(pod: qstates.PodMeta) -> int:
    """The pod cgroup's cpu.shares as kubelet sets it: its CPU request in shares, 2 without one.

    kubelet's `ResourceConfigForPod` (`MilliCPUToShares` of the pod's request;
    BestEffort pods get the minimum); v2 writes the matching weight.
    """
    return batchrules.milli_cpu_to_shares(pod.requests.cpu)
