"""BatchResource: each Batch (and Mid) pod's and container's cgroups from its batch (mid) resources.

Koordinator's `BatchResource` runtime hook in reconcile mode (gate
`BatchResource`, Beta, on by default in koordlet's runtime-hooks gates). For
every active pod labelled BE whose containers name `kubernetes.io/batch-cpu` or
`kubernetes.io/batch-memory` (see `rules` for the values), the pod cgroup and
its containers' cgroups get cpu.shares (v2 cpu.weight), the CFS quota (v2
cpu.max) and the memory limit (v2 memory.max), through the resource executor:
read-before-write, the v1->v2 mapping, and a leveled write per pod and
resource; Mid pods (koord-mid, `kubernetes.io/mid-*`) get the same from their mid
resources (`rules`) (v1 refuses a container quota above its pod's, so a rise loosens the
pod first and a cut shrinks the containers first).

When it runs: on every pod event of the states informer (a container that
appears is in the pod's status with its id, so its cgroup is set well within
a second; the agent's `States` implements `qosmanager.states.PodEvents`), and
every `--batch-resource-interval-seconds` (10 s, koordlet's
`--runtime-hooks-reconcile-interval`) to repair drift; the executor re-reads a
file it wrote only after its force-rewrite period, so a steady round costs
little. One pod whose cgroup refuses a value (memory limit below its usage)
is logged and skipped; the others are still set.

A pod whose cgroup has `cpu.idle = 1` (gate `BECPUIdle`) keeps the kernel's
minimum weight at the pod level: its pod-level cpu.shares (v2 cpu.weight) is
left out, since the kernel refuses it with EINVAL, and its containers' are
still set (`nodeqos_agent_batch_resource_idle_pods` counts such pods). The
flag is read through the executor, so BECPUIdle's writes are seen at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import PurePosixPath

import cgroups
from qosmanager import executor as qexecutor
from qosmanager import features
from qosmanager import states as qstates
from qosmanager.plugins import base
from qosmanager.plugins.batchresource import rules

log = logging.getLogger(__name__)

NAME = features.BATCH_RESOURCE
DEFAULT_INTERVAL = 10.0
# Longest wait between two looks at the stop flag while waiting for a pod event.
_WAKE_SECONDS = 0.5

_RESOURCES = (
    (cgroups.Resource.CPU_SHARES, "cpu_shares"),
    (cgroups.Resource.CPU_QUOTA, "cfs_quota_us"),
    (cgroups.Resource.MEMORY_LIMIT, "memory_limit"),
)

Targets = list[tuple[PurePosixPath, rules.CgroupValues]]
_Memo = tuple[qstates.PodMeta, rules.QuotaRule, Targets | None]


def targets(pod: qstates.PodMeta, rule: rules.QuotaRule) -> Targets | None:
    """The pod's cgroup dir and its running containers' dirs with their values, pod first.

    None when the pod is neither a Batch nor a Mid pod (`rules.tier_of`), is inactive,
    or names no resource of its tier.
    """
    tier = rules.tier_of(pod.pod) if pod.is_active else None
    if tier is None:
        return None
    spec = rules.batch_spec(pod, tier)
    if spec is None:
        return None
    found = [(pod.cgroup_dir, rules.pod_values(spec, rule, tier))]
    for container in pod.containers:
        batch = spec.get(container.name)
        if batch is not None and container.cgroup_dir is not None:
            found.append((container.cgroup_dir, rules.container_values(batch, rule, tier)))
    return found


class BatchResource(base.PeriodicStrategy):
    """The BatchResource strategy; `tick()` reconciles every Batch pod once."""

    name = NAME
    interval_flag = "--batch-resource-interval-seconds"

    def __init__(
        self,
        handle: base.Handle | None = None,
        *,
        interval: float = DEFAULT_INTERVAL,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(handle, interval=interval)
        self._monotonic = monotonic
        self.rounds = 0  # reconcile rounds run, for tests and the bench
        self._memo: dict[str, _Memo] = {}
        self._warned: set[tuple[str, cgroups.Resource]] = set()
        self._kernel_idle = True  # False once a cgroup had no cpu.idle file: never ask again

    def run(self, stop: threading.Event) -> None:
        if self.interval <= 0:
            log.info("%s disabled by its interval flag", self.name)
            return
        events = self.states if isinstance(self.states, qstates.PodEvents) else None
        seen = -1
        next_full = self._monotonic()
        while not stop.is_set():
            version = events.pods_version if events is not None else seen
            now = self._monotonic()
            if version != seen or now >= next_full:
                seen = version  # read before the round: a change during it triggers another
                self._round()
                if now >= next_full:
                    next_full = now + self.interval
            wait = min(_WAKE_SECONDS, max(0.0, next_full - self._monotonic()))
            if events is not None:
                events.wait_pods_changed(seen, wait)
            else:
                stop.wait(wait)

    def _round(self) -> None:
        try:
            self.tick()
        except qexecutor.ClaimRefused as err:
            log.warning("%s: %s", self.name, err)

    def tick(self) -> None:
        rule = rules.quota_rule(self.states.node_slo(), self.states.node())
        memo: dict[str, _Memo] = {}
        idle = 0
        for pod in self.states.pods():
            # the informer hands out the same PodMeta until the pod changes
            known = self._memo.get(pod.uid)
            if known is not None and known[0] is pod and known[1] == rule:
                wanted = known[2]
            else:
                wanted = targets(pod, rule)
            memo[pod.uid] = (pod, rule, wanted)
            if wanted is not None:
                idle += self._apply(pod, wanted)
        self.handle.metrics.batch_resource_idle_pods.set(idle)
        self._memo = memo
        self._warned = {w for w in self._warned if w[0] in memo}
        self.rounds += 1

    def _apply(self, pod: qstates.PodMeta, wanted: Targets) -> int:
        """Set one pod's cgroups; 1 when its pod-level shares were left out (cpu.idle)."""
        executor = self.handle.executor
        idle = self._pod_idle(wanted[0][0])
        for resource, attr in _RESOURCES:
            levels: list[qexecutor.Level] = [[(d, getattr(v, attr)) for d, v in wanted[:1]]]
            if idle and resource is cgroups.Resource.CPU_SHARES:
                levels = []  # the kernel refuses an idle group's shares (EINVAL)
            if len(wanted) > 1:
                levels.append([(d, getattr(v, attr)) for d, v in wanted[1:]])
            if not levels:
                continue
            try:
                executor.update_leveled(NAME, resource, levels)
            except cgroups.CgroupGone:
                return int(idle)  # the pod went away; the next event says so
            except qexecutor.ClaimRefused:
                raise
            except cgroups.CgroupError as err:
                # once per pod and resource at warning level: a refusal repeats every round
                key = (pod.uid, resource)
                level = logging.DEBUG if key in self._warned else logging.WARNING
                self._warned.add(key)
                log.log(level, "%s: pod %s: %s not set: %s", NAME, pod.key, resource.name, err)
        return int(idle)

    def _pod_idle(self, pod_dir: PurePosixPath) -> bool:
        """The pod cgroup has cpu.idle = 1 (BECPUIdle's, through the executor's cache)."""
        if not self._kernel_idle:
            return False
        try:
            return self.handle.executor.current(pod_dir, cgroups.Resource.CPU_IDLE) == 1
        except cgroups.Unsupported:
            self._kernel_idle = False  # a kernel before 5.15: no group is ever idle
        except cgroups.CgroupError:
            pass  # gone or unreadable: the writes below say which
        return False
