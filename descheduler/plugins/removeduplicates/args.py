"""RemoveDuplicatesArgs (kubernetes-sigs/descheduler `pkg/framework/plugins/removeduplicates`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from descheduler.config import codecs, common, fields
from descheduler.config.common import IncludeExclude


@dataclass(frozen=True, kw_only=True, slots=True)
class RemoveDuplicatesArgs(fields.PluginArgs):
    KIND: ClassVar[str] = "RemoveDuplicatesArgs"

    namespaces: IncludeExclude | None = field(
        default=None, metadata=fields.spec("namespaces", common.NAMESPACES)
    )
    exclude_owner_kinds: tuple[str, ...] = field(
        default=(), metadata=fields.spec("excludeOwnerKinds", codecs.ListOf(codecs.NAME))
    )
