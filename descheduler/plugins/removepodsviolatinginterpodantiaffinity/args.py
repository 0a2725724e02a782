"""RemovePodsViolatingInterPodAntiAffinityArgs (kubernetes-sigs/descheduler
`pkg/framework/plugins/removepodsviolatinginterpodantiaffinity`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from descheduler.config import common


@dataclass(frozen=True, kw_only=True, slots=True)
class RemovePodsViolatingInterPodAntiAffinityArgs(common.PodScopeArgs):
    KIND: ClassVar[str] = "RemovePodsViolatingInterPodAntiAffinityArgs"
