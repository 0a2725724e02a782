"""BECPUShares: gives best-effort pods the smallest CPU weight, so they yield to LS pods at once.

Koordinator's BE pods are often Burstable to the kubelet (they request batch
resources), so their pod cgroup gets CPU shares proportional to their
requests and competes with latency-sensitive pods. This plugin sets the pod
cgroup's `cpu.shares` (cgroup v1) or `cpu.weight` (v2, mapped by the
executor) of every active Koordinator-BE pod to `--be-cpu-shares` (default 2,
the kernel's minimum: weight 1 on v2), every `--be-cpu-shares-interval-seconds`.

It is the QoS plugin surface the agent loads through the entry point
`BECPUShares = "nodeqos_beshares"` (group `nodeqos.agent.qos_plugins`): `NAME`
(its gate in `--qos-extension-plugins`), `FEATURE` (the gate's default, stage
and description) and `factory` (a fresh plugin for each agent command).
Building on `qosmanager.PeriodicStrategy` gives it the agent's `Handle`; every
write goes through the handle's resource executor, which skips unchanged
values, refuses a file another strategy owns and counts writes in the agent's
metrics.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

import cgroups
import qosmanager
from kube import classify

NAME = "BECPUShares"
FEATURE = qosmanager.FeatureSpec(
    default=False, stage=qosmanager.Stage.ALPHA, description="smallest CPU weight for BE pods"
)
MIN_SHARES, MAX_SHARES = 2, 262144  # the kernel's cpu.shares bounds


class BECPUShares(qosmanager.PeriodicStrategy):
    """Every tick: the pod cgroup of each active BE pod gets `shares`."""

    name = NAME
    interval_flag = "--be-cpu-shares-interval-seconds"

    def __init__(
        self,
        handle: qosmanager.Handle | None = None,
        *,
        interval: float = 1.0,
        shares: int = MIN_SHARES,
    ) -> None:
        super().__init__(handle, interval=interval)
        self.shares = shares

    def init_flags(self) -> Sequence[click.Parameter]:
        def store(_ctx: click.Context, _param: click.Parameter, value: int) -> int:
            self.shares = value
            return value

        shares = click.Option(
            ["--be-cpu-shares"],
            type=click.IntRange(MIN_SHARES, MAX_SHARES),
            default=self.shares,
            show_default=True,
            expose_value=False,  # the callback configures this instance
            callback=store,
            help=f"{NAME}: cpu.shares of BE pods (cgroup v2: the matching cpu.weight).",
        )
        return [*super().init_flags(), shares]

    def tick(self) -> None:
        for pod in self.states.pods():
            if pod.qos is not classify.KoordQOS.BE or not pod.is_active:
                continue
            try:
                self.handle.executor.update(
                    NAME, pod.cgroup_dir, cgroups.Resource.CPU_SHARES, self.shares
                )
            except cgroups.CgroupGone:
                continue  # the pod left between the listing and the write: normal


factory = BECPUShares

__all__ = ["FEATURE", "NAME", "BECPUShares", "factory"]
