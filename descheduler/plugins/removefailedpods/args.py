"""RemoveFailedPodsArgs (kubernetes-sigs/descheduler `pkg/framework/plugins/removefailedpods`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from descheduler.config import codecs, common, fields


@dataclass(frozen=True, kw_only=True, slots=True)
class RemoveFailedPodsArgs(common.PodScopeArgs):
    KIND: ClassVar[str] = "RemoveFailedPodsArgs"

    exclude_owner_kinds: tuple[str, ...] = field(
        default=(), metadata=fields.spec("excludeOwnerKinds", codecs.ListOf(codecs.NAME))
    )
    # Upstream default: failed pods younger than an hour are left alone.
    min_pod_lifetime_seconds: int = field(
        default=3600, metadata=fields.spec("minPodLifetimeSeconds", codecs.NON_NEGATIVE)
    )
    reasons: tuple[str, ...] = field(
        default=(), metadata=fields.spec("reasons", codecs.ListOf(codecs.NAME))
    )
    exit_codes: tuple[int, ...] = field(
        default=(), metadata=fields.spec("exitCodes", codecs.ListOf(codecs.INTEGER))
    )
    including_init_containers: bool = field(
        default=False, metadata=fields.spec("includingInitContainers", codecs.BOOL)
    )
