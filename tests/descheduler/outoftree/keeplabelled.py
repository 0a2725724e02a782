"""KeepLabelled: a Filter plugin with Args that vetoes evicting pods carrying a label.

The shape an out-of-tree Evictor/Filter plugin has: NAME, Args, EXTENSION_POINTS, factory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from descheduler.config import ExtensionPoint, FieldPath, PluginArgs, codecs, fields
from descheduler.config.errors import Errors
from descheduler.framework import Handle, Reason, Refusal
from kube import objects

NAME = "KeepLabelled"


@dataclass(frozen=True, kw_only=True, slots=True)
class Args(PluginArgs):
    KIND: ClassVar[str] = "KeepLabelledArgs"

    label: str = field(default="", metadata=fields.spec("label", codecs.STRING))
    value: str = field(default="true", metadata=fields.spec("value", codecs.STRING))

    def check(self, path: FieldPath, errors: Errors, failed: frozenset[str]) -> None:
        if "label" not in failed and not self.label:
            errors.add(path.child("label"), "required: the label whose pods are never evicted")


EXTENSION_POINTS = frozenset({ExtensionPoint.FILTER})


class KeepLabelled:
    name = NAME

    def __init__(self, args: Args) -> None:
        self.args = args

    def filter(self, pod: objects.Pod) -> Refusal | None:
        if pod.labels.get(self.args.label) == self.args.value:
            detail = f"pod is labelled {self.args.label}={self.args.value}"
            return Refusal(Reason.FILTERED, detail, by=NAME)
        return None


def factory(args: PluginArgs, handle: Handle) -> KeepLabelled:
    if not isinstance(args, Args):
        raise TypeError(f"{NAME} needs KeepLabelledArgs, not {type(args).__name__}")
    return KeepLabelled(args)
