"""The plugin Registry: name → (config spec, factory).

A factory builds a plugin from its decoded Args and the profile's Handle:

    def factory(args: PluginArgs, handle: Handle) -> MyPlugin

`descheduler.plugins.registry()` builds one from the in-tree plugins, the
installed entry points and an embedder's extra plugins (`framework.discovery`).
A plugin whose logic is not written yet is registered without a factory, so its
config still loads while starting a profile that enables it fails, naming it. A
plugin that could not be loaded is registered broken (`register_broken`): its
name is known, its `error` says why, and a profile that enables it is left out
at start-up. Tests and embedders build their own Registry (registering a taken
name raises, as pluggy's `PluginManager.register` does); `catalog()` feeds the
config loader so a test plugin's name and Args load like an in-tree one's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from descheduler.config import ExtensionPoint, PluginArgs, PluginSpec

if TYPE_CHECKING:
    from descheduler.framework.handle import Handle

Factory = Callable[[PluginArgs, "Handle"], object]


class RegistryError(ValueError):
    """A plugin name registered twice, or looked up and not found."""


@dataclass(frozen=True, slots=True)
class Entry:
    spec: PluginSpec
    factory: Factory | None = None
    error: str | None = None  # why a broken plugin could not be loaded

    @property
    def name(self) -> str:
        return self.spec.name


class Registry:
    """Plugins by name. Build one, `register` into it, hand it to the runner."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}

    def register(
        self,
        name: str,
        factory: Factory | None,
        *,
        args: type[PluginArgs],
        extension_points: frozenset[ExtensionPoint],
    ) -> None:
        """Add a plugin; `factory` None means "known to the config, not implemented yet"."""
        if name in self._entries:
            raise RegistryError(f"plugin name {name!r} is already registered")
        self._entries[name] = Entry(PluginSpec(name, args, extension_points), factory)

    def register_broken(self, name: str, error: str, *, args: type[PluginArgs]) -> None:
        """Record a plugin that cannot be loaded (replacing any entry of that name).

        `args` decodes its pluginConfig without checking it (the plugin's own
        Args type is not available); every extension point is allowed, so the
        config loads and the start-up report names the real problem.
        """
        spec = PluginSpec(name, args, frozenset(ExtensionPoint))
        self._entries[name] = Entry(spec, None, error)

    def broken(self) -> dict[str, str]:
        """Name → error of every plugin that could not be loaded."""
        return {name: e.error for name, e in self._entries.items() if e.error is not None}

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, name: str) -> Entry:
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries))
            raise RegistryError(f'unknown plugin "{name}"; known plugins: {known}') from None

    def catalog(self) -> Mapping[str, PluginSpec]:
        """Name → spec, for `descheduler.config.load_config(..., plugins=...)`."""
        return MappingProxyType({name: entry.spec for name, entry in self._entries.items()})

    def implemented(self) -> list[str]:
        """Names that have a factory, sorted."""
        return sorted(name for name, entry in self._entries.items() if entry.factory is not None)
