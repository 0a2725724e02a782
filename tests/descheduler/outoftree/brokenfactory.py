"""A plugin whose factory raises something other than ValueError: a bug, not bad Args."""

from __future__ import annotations

from descheduler.config import ExtensionPoint, PluginArgs
from descheduler.framework import Handle
from tests.descheduler import fakes

NAME = "BrokenFactory"
Args = fakes.NoArgs
EXTENSION_POINTS = frozenset({ExtensionPoint.BALANCE})


def factory(args: PluginArgs, handle: Handle) -> object:
    raise RuntimeError("connection pool exhausted")
