"""RemovePodsHavingTooManyRestartsArgs (kubernetes-sigs/descheduler
`pkg/framework/plugins/removepodshavingtoomanyrestarts`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from descheduler.config import codecs, common, fields
from kube.configstruct import Errors, FieldPath

STATES = ("Running", "CrashLoopBackOff")


@dataclass(frozen=True, kw_only=True, slots=True)
class RemovePodsHavingTooManyRestartsArgs(common.PodScopeArgs):
    KIND: ClassVar[str] = "RemovePodsHavingTooManyRestartsArgs"

    # Upstream has no default: 0 is rejected, so the threshold must be written.
    pod_restart_threshold: int = field(
        default=0, metadata=fields.spec("podRestartThreshold", codecs.INTEGER)
    )
    including_init_containers: bool = field(
        default=False, metadata=fields.spec("includingInitContainers", codecs.BOOL)
    )
    states: tuple[str, ...] = field(
        default=(), metadata=fields.spec("states", codecs.ListOf(codecs.KeyChoice(STATES)))
    )

    def check(self, path: FieldPath, errors: Errors, failed: frozenset[str]) -> None:
        if "podRestartThreshold" not in failed and self.pod_restart_threshold < 1:
            errors.add(path.child("podRestartThreshold"), "must be >= 1")
