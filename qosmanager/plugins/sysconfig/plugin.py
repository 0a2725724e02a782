"""SystemConfig: node-wide memory reclaim knobs under /proc/sys (gate `SystemConfig`).

From koordlet's `plugins/sysreconcile/system_config.go`; the NodeSLO
`systemStrategy` fields are the second gate (an unset field is left alone):

    vm/min_free_kbytes        = memory capacity (KiB) * minFreeKbytesFactor / 10000
    vm/watermark_scale_factor = watermarkScaleFactor

Values outside the kernel-safe ranges koordlet enforces (min_free_kbytes in
[10 MiB, 10 GiB] in KiB, watermark_scale_factor in [10, 400]) are refused with a
warning and not written. Files are written through the executor, under the
sysctl root the agent injects (the host's /proc/sys, mounted into the pod).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import cgroups
from kube import nodeslo
from qosmanager import features
from qosmanager.plugins import base

log = logging.getLogger(__name__)

NAME = features.SYSTEM_CONFIG
MIN_FREE_KBYTES = "vm/min_free_kbytes"
WATERMARK_SCALE_FACTOR = "vm/watermark_scale_factor"
MIN_FREE_KBYTES_RANGE = (10 * 1024, 10 * 1024 * 1024)
WATERMARK_SCALE_FACTOR_RANGE = (10, 400)


@dataclass(frozen=True, slots=True)
class Setting:
    """One sysctl value to write."""

    name: str
    value: int


def settings(strategy: nodeslo.SystemStrategy | None, memory_bytes: int) -> list[Setting]:
    """The sysctls `strategy` asks for on a node with `memory_bytes`, safe values only."""
    s = strategy or nodeslo.SystemStrategy()
    out: list[Setting] = []
    if s.min_free_kbytes_factor is not None and memory_bytes > 0:
        value = memory_bytes // 1024 * s.min_free_kbytes_factor // 10000
        out += _checked(MIN_FREE_KBYTES, value, MIN_FREE_KBYTES_RANGE)
    if s.watermark_scale_factor is not None:
        out += _checked(
            WATERMARK_SCALE_FACTOR, s.watermark_scale_factor, WATERMARK_SCALE_FACTOR_RANGE
        )
    return out


def _checked(name: str, value: int, bounds: tuple[int, int]) -> list[Setting]:
    low, high = bounds
    if low <= value <= high:
        return [Setting(name, value)]
    log.warning(
        "%s: %s=%d is outside the safe range [%d, %d]; not written", NAME, name, value, low, high
    )
    return []


class SystemConfig(base.PeriodicStrategy):
    """The SystemConfig strategy."""

    name = NAME
    interval_flag = "--system-config-interval-seconds"

    def tick(self) -> None:
        node = self.states.node()
        if node is None:
            return
        for setting in settings(self.states.node_slo().system_strategy, node.capacity.memory):
            try:
                self.handle.executor.update_sysctl(NAME, setting.name, setting.value)
            except cgroups.Unsupported as err:
                log.debug("%s: %s", NAME, err)
