"""BECPUIdle: `cpu.idle = 1` on every BE pod's own cgroup; back to 0 when the gate is off.

Gate `BECPUIdle` (Alpha, off by default). Every `--be-cpu-idle-interval-seconds`
(1 s) each active BE pod (Koordinator's BE filter: labelled BE, or a
Kubernetes BestEffort pod) gets `cpu.idle = 1` on its pod cgroup, cgroup v1
(`cpu/<pod>/cpu.idle`) and v2 alike, both drivers, through the resource
executor (read before write; a file it set is re-read only after the
force-rewrite period, so drift such as systemd re-applying a slice's
properties is repaired then). Never on the kubepods root or a QoS-class
cgroup: see `rules` for why (Koordinator issue 2732).

What it leaves behind, and how it lives with the other strategies:

- Pods that stop being BE while they run go back to 0. Going back to 0 makes
  the kernel reset the group's shares to 1024, so kubelet's value for the
  pod (`rules.kubelet_shares`, 2 for a BestEffort pod) is written back at
  once; the executor forgets its cached shares of that cgroup, so
  BatchResource rewrites a Batch pod's own value on its next round.
- `revert()` does that for every BE pod: when the plugin stops (SIGTERM) and,
  called by the manager at start-up, when the gate is off (a gate turned off
  across an agent restart, or an agent killed before it could revert).
- BatchResource leaves out the pod-level `cpu.shares`/`cpu.weight` of a pod
  whose cgroup has `cpu.idle = 1` (the kernel would refuse it with EINVAL) and
  still sets its containers; BE suppression writes quota and cpusets, which
  an idle group accepts, on the QoS dir, pods and containers unchanged.

A kernel without `cpu.idle` (before 5.15; checked once on the kubepods
cgroup): one log line, `nodeqos_agent_be_cpu_idle_supported` 0, and nothing
else happens.
"""

from __future__ import annotations

import logging
import threading
from pathlib import PurePosixPath

import cgroups
from qosmanager import executor as qexecutor
from qosmanager import features
from qosmanager import states as qstates
from qosmanager.plugins import base
from qosmanager.plugins.becpuidle import rules

log = logging.getLogger(__name__)

NAME = features.BE_CPU_IDLE
DEFAULT_INTERVAL = 1.0


class BECPUIdle(base.PeriodicStrategy):
    """The BECPUIdle strategy; `tick()` holds every BE pod cgroup at cpu.idle = 1."""

    name = NAME
    interval_flag = "--be-cpu-idle-interval-seconds"

    def __init__(
        self, handle: base.Handle | None = None, *, interval: float = DEFAULT_INTERVAL
    ) -> None:
        super().__init__(handle, interval=interval)
        self._supported: bool | None = None  # the kernel has cpu.idle; None: not known yet
        self._reported = False
        self._held: set[PurePosixPath] = set()  # pod cgroups set to 1 in the last round
        self._warned: set[PurePosixPath] = set()

    def run(self, stop: threading.Event) -> None:
        """Hold BE pods idle until `stop`, then set them back (also when the interval is 0)."""
        super().run(stop)
        self.revert()

    def tick(self) -> None:
        if not self._kernel_has_idle(report=True):
            return
        pods = self.states.pods()
        held: set[PurePosixPath] = set()
        for rel_dir in rules.idle_pods(pods):
            if self._set_idle(rel_dir):
                held.add(rel_dir)
        # a pod held last round that is still here but no longer BE goes back to 0
        # (one being deleted is left as it is: its cgroup goes with it)
        dropped = self._held - held
        for pod in pods:
            if pod.cgroup_dir in dropped and not rules.is_be(pod):
                self._unset_idle(pod)
        self._held = held
        self.handle.metrics.be_cpu_idle_pods.set(len(held))

    def revert(self) -> None:
        """cpu.idle back to 0, with kubelet's shares, on every BE pod cgroup found at 1."""
        if not self._kernel_has_idle(report=False):
            return
        reverted = 0
        for pod in self.states.pods():
            if rules.is_be(pod) or pod.cgroup_dir in self._held:
                reverted += self._unset_idle(pod)
        self._held = set()
        if self._reported:
            self.handle.metrics.be_cpu_idle_pods.set(0)
        if reverted:
            log.info("%s: cpu.idle set back to 0 on %d BE pod cgroup(s)", NAME, reverted)

    # -- host --------------------------------------------------------------------
    def _kernel_has_idle(self, *, report: bool) -> bool:
        """Whether the kernel has cpu.idle, looked up once on the kubepods cgroup."""
        fs = self.handle.fs
        if self._supported is None:
            try:
                cgroups.read_resource(fs, fs.kubepods_root(), cgroups.Resource.CPU_IDLE)
                self._supported = True
            except cgroups.Unsupported:
                self._supported = False
            except cgroups.CgroupError as err:  # no kubepods cgroup yet: ask again next round
                log.debug("%s: cannot look for cpu.idle yet: %s", NAME, err)
                return False
        if report and not self._reported:
            self._reported = True
            self.handle.metrics.be_cpu_idle_supported.set(int(self._supported))
            if not self._supported:
                log.warning(
                    "%s: this kernel has no cpu.idle (Linux >= 5.15 has it); BE pods are left"
                    " as they are",
                    NAME,
                )
        return self._supported

    def _allowed(self, rel_dir: PurePosixPath) -> bool:
        fs = self.handle.fs
        if rules.is_pod_cgroup(rel_dir, fs.driver, fs.kubelet_root):
            return True
        self._warn(rel_dir, "not a pod cgroup (kubelet writes the QoS cgroups' shares)")
        return False

    def _set_idle(self, rel_dir: PurePosixPath) -> bool:
        """cpu.idle = 1 on one pod cgroup; False when it is not there (yet) or refused."""
        if not self._allowed(rel_dir):
            return False
        try:
            self.handle.executor.update(NAME, rel_dir, cgroups.Resource.CPU_IDLE, rules.IDLE)
        except cgroups.CgroupGone:
            return False  # pending: kubelet has not made the cgroup yet
        except qexecutor.ClaimRefused:
            raise
        except cgroups.CgroupError as err:
            self._warn(rel_dir, str(err))
            return False
        self._warned.discard(rel_dir)
        return True

    def _unset_idle(self, pod: qstates.PodMeta) -> int:
        """cpu.idle = 0 on a pod cgroup, and kubelet's shares back; 1 if it was idle."""
        rel_dir = pod.cgroup_dir
        if not self._allowed(rel_dir):
            return 0
        executor = self.handle.executor
        try:
            changed = executor.update(NAME, rel_dir, cgroups.Resource.CPU_IDLE, rules.NOT_IDLE)
        except cgroups.CgroupGone:
            return 0
        except cgroups.CgroupError as err:
            self._warn(rel_dir, str(err))
            return 0
        if not changed:
            return 0
        # the kernel has just reset the group's shares to 1024 (NICE_0_LOAD)
        shares = rules.kubelet_shares(pod)
        try:
            executor.update(NAME, rel_dir, cgroups.Resource.CPU_SHARES, shares)
        except qexecutor.ClaimRefused:
            log.debug("%s: %s: BatchResource sets its shares this tick", NAME, pod.key)
        except cgroups.CgroupGone:
            pass
        except cgroups.CgroupError as err:
            self._warn(rel_dir, f"cpu.shares {shares} not restored: {err}")
        return 1

    def _warn(self, rel_dir: PurePosixPath, why: str) -> None:
        """Once per cgroup at warning level: a refusal repeats every round."""
        level = logging.DEBUG if rel_dir in self._warned else logging.WARNING
        self._warned.add(rel_dir)
        log.log(level, "%s: %s: cpu.idle left alone: %s", NAME, rel_dir, why)
