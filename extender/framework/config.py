"""The extender's configuration: one profile of filter and score plugins, as kube-scheduler's.

    apiVersion: nodeqos.dev/v1alpha1
    kind: SchedulerExtenderConfiguration
    profiles:
    - plugins:
        filter:
          enabled:
          - name: LoadAwareScheduling
          - name: BEMemoryGuard
            required: true            # its failure refuses the pod's nodes, not skipped
        score:
          enabled:
          - name: LoadAwareScheduling
            weight: 1
      pluginConfig:
      - name: LoadAwareScheduling
        args: {usageThresholds: {cpu: 65}}

A file without that `kind` is a LoadAwareSchedulingArgs document, as before
plugins existed: it loads exactly as it did (same defaults, same problems with
the same paths) into LoadAwareScheduling enabled at filter and score, weight 1.

`decode_config` and `load_config` are pure (no cluster calls): yaml →
typed profile → every problem collected → `ArgsError`, one line each with its
field path.
"""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from extender.framework.interfaces import GROUP, ArgsError, ExtensionPoint
from extender.framework.registry import Registry

API_VERSION = "nodeqos.dev/v1alpha1"
KIND = "SchedulerExtenderConfiguration"
LEGACY_PLUGIN = "LoadAwareScheduling"  # what a bare LoadAwareSchedulingArgs document configures
GUIDE = "docs/scheduler-plugins.md"

# kube-scheduler's other extension points, and why an extender cannot serve them.
_UNSERVABLE = {
    "queueSort": "kube-scheduler orders its queue itself and never asks an extender",
    "preFilter": "PreFilter runs for every plugin enabled at filter; list the plugin there",
    "postFilter": "kube-scheduler's preemption calls an extender's preemptVerb, not plugins",
    "preScore": "PreScore runs for every plugin enabled at score; list the plugin there",
    "reserve": "kube-scheduler never tells an extender which node it chose",
    "permit": "an extender cannot hold a pod at the gate; kube-scheduler binds after prioritize",
    "preBind": "binding stays kube-scheduler's",
    "bind": "binding stays kube-scheduler's",
    "postBind": "binding stays kube-scheduler's",
    "multiPoint": "list the plugin under filter and score",
}


@dataclass(frozen=True, slots=True)
class Enabled:
    """A plugin enabled at one point."""

    name: str
    weight: int = 1  # score only
    required: bool = False  # filter only: its failure refuses the nodes instead of skipping it


@dataclass(frozen=True, slots=True)
class Profile:
    filter: tuple[Enabled, ...]
    score: tuple[Enabled, ...]
    args: Mapping[str, object]  # plugin name -> its decoded Args (every enabled plugin has one)
    legacy: bool = False  # loaded from a bare LoadAwareSchedulingArgs document
    name: str = ""

    @property
    def plugins(self) -> list[str]:
        """Every enabled plugin, each once, filters first."""
        return list(dict.fromkeys(e.name for e in (*self.filter, *self.score)))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _unknown(name: str, registry: Registry) -> str:
    known = ", ".join(sorted(n for n in registry if registry.get(n).error is None))  # type: ignore[union-attr]
    return (
        f'unknown scheduler plugin "{name}": install the package that declares it in the'
        f' entry-point group "{GROUP}" next to nodeqos (known plugins: {known})'
    )


def _decode_enabled(
    raw: object, path: str, point: ExtensionPoint, registry: Registry, errors: list[str]
) -> tuple[Enabled, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        errors.append(f"{path}: must be a map with 'enabled' (got {type(raw).__name__})")
        return ()
    for key in raw:
        if key != "enabled":
            hint = "; a plugin is off unless listed in enabled" if key == "disabled" else ""
            errors.append(f"{path}.{key}: unknown field; known fields are enabled{hint}")
    items = raw.get("enabled") or []
    if not isinstance(items, list):
        errors.append(f"{path}.enabled: must be a list of {{name: ...}}")
        return ()
    found: list[Enabled] = []
    seen: set[str] = set()
    allowed = {"name", "weight"} if point is ExtensionPoint.SCORE else {"name", "required"}
    for index, item in enumerate(items):
        where = f"{path}.enabled[{index}]"
        if not isinstance(item, Mapping):
            errors.append(f"{where}: must be a map such as {{name: LoadAwareScheduling}}")
            continue
        for key in item:
            if key not in allowed:
                errors.append(
                    f"{where}.{key}: unknown field at {point}; known fields are"
                    f" {', '.join(sorted(allowed))}"
                )
        name = item.get("name")
        if not isinstance(name, str) or not name:
            errors.append(f"{where}.name: must be a plugin name")
            continue
        if name in seen:
            errors.append(f"{where}.name: {name} is enabled twice at {point}")
            continue
        seen.add(name)
        entry = registry.get(name)
        if entry is None:
            errors.append(f"{where}.name: {_unknown(name, registry)}")
            continue
        if entry.error is not None:
            errors.append(f"{where}.name: {entry.error}")
            continue
        if point not in entry.extension_points:
            points = ", ".join(sorted(entry.extension_points))
            errors.append(f"{where}.name: plugin {name} does not implement {point} (only {points})")
            continue
        weight = item.get("weight", 1)
        if not _is_int(weight) or not 1 <= weight <= 100:
            errors.append(f"{where}.weight: must be an integer within [1, 100] (got {weight!r})")
            weight = 1
        required = item.get("required", False)
        if not isinstance(required, bool):
            errors.append(f"{where}.required: must be true or false (got {required!r})")
            required = False
        found.append(Enabled(name, weight, required))
    return tuple(found)


def _decode_profile(raw: object, path: str, registry: Registry, errors: list[str]) -> Profile:
    if not isinstance(raw, Mapping):
        errors.append(f"{path}: must be a map with plugins and pluginConfig")
        return Profile((), (), {})
    for key in raw:
        if key not in ("name", "schedulerName", "plugins", "pluginConfig"):
            errors.append(
                f"{path}.{key}: unknown field; known fields are name, plugins, pluginConfig"
            )
    name = raw.get("name") or raw.get("schedulerName") or ""
    plugins = raw.get("plugins") or {}
    filters: tuple[Enabled, ...] = ()
    scores: tuple[Enabled, ...] = ()
    if not isinstance(plugins, Mapping):
        errors.append(f"{path}.plugins: must be a map of extension point to plugin set")
    else:
        for point, value in plugins.items():
            where = f"{path}.plugins.{point}"
            if point == ExtensionPoint.FILTER:
                filters = _decode_enabled(value, where, ExtensionPoint.FILTER, registry, errors)
            elif point == ExtensionPoint.SCORE:
                scores = _decode_enabled(value, where, ExtensionPoint.SCORE, registry, errors)
            elif point in _UNSERVABLE:
                errors.append(
                    f"{where}: the extender serves filter and score only"
                    f" ({_UNSERVABLE[point]}; see {GUIDE})"
                )
            else:
                errors.append(f"{where}: unknown extension point; known points are filter, score")
    enabled = {e.name for e in (*filters, *scores)}
    decoded: dict[str, object] = {}
    configs = raw.get("pluginConfig") or []
    if not isinstance(configs, list):
        errors.append(f"{path}.pluginConfig: must be a list of {{name, args}}")
        configs = []
    for index, item in enumerate(configs):
        where = f"{path}.pluginConfig[{index}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            errors.append(f"{where}: must be a map with name and args")
            continue
        for key in item:
            if key not in ("name", "args"):
                errors.append(f"{where}.{key}: unknown field; known fields are name, args")
        plugin = item["name"]
        entry = registry.get(plugin)
        if entry is None:
            errors.append(f"{where}.name: {_unknown(plugin, registry)}")
            continue
        if plugin in decoded:
            errors.append(f"{where}.name: a second pluginConfig for {plugin}")
            continue
        if entry.args is None:  # broken: reported where it is enabled
            continue
        decoded[plugin] = _decode_args(entry.args, item.get("args"), f"{where}.args", errors)
    for plugin in sorted(enabled - decoded.keys()):
        entry = registry.get(plugin)
        if entry is not None and entry.args is not None:
            decoded[plugin] = _decode_args(entry.args, {}, f"{path}.pluginConfig[{plugin}]", errors)
    return Profile(
        filters, scores, {k: v for k, v in decoded.items() if v is not None}, False, str(name)
    )


def _decode_args(cls: type, raw: object, path: str, errors: list[str]) -> object | None:
    try:
        decoded: object = cls.from_mapping({} if raw is None else raw, path)  # type: ignore[attr-defined]
        return decoded
    except ArgsError as err:
        errors.extend(err.problems)
    except Exception as err:  # a third party's decoder: report it as a problem, never crash
        errors.append(f"{path}: the plugin's Args.from_mapping failed: {type(err).__name__}: {err}")
    return None


def decode_config(raw: object, registry: Registry) -> Profile:
    """The profile of a parsed document; raises ArgsError listing every problem."""
    errors: list[str] = []
    if not (isinstance(raw, Mapping) and raw.get("kind") == KIND):
        entry = registry.get(LEGACY_PLUGIN)
        assert entry is not None and entry.args is not None, "LoadAwareScheduling is in-tree"
        args = entry.args.from_mapping(raw, "")  # type: ignore[attr-defined]
        plugin = (Enabled(LEGACY_PLUGIN),)
        return Profile(plugin, plugin, {LEGACY_PLUGIN: args}, legacy=True)
    for key in raw:
        if key not in ("apiVersion", "kind", "profiles"):
            errors.append(f"{key}: unknown field; known fields are apiVersion, kind, profiles")
    if raw.get("apiVersion") != API_VERSION:
        errors.append(f"apiVersion: must be {API_VERSION} (got {raw.get('apiVersion')!r})")
    profiles: Any = raw.get("profiles")
    profile = Profile((), (), {})
    if not isinstance(profiles, list) or len(profiles) != 1:
        errors.append(
            "profiles: must list exactly one profile (kube-scheduler calls one urlPrefix per"
            " extender; serve a second profile from a second extender)"
        )
    else:
        profile = _decode_profile(profiles[0], "profiles[0]", registry, errors)
        if not profile.filter and not profile.score and not errors:
            errors.append("profiles[0].plugins: enable at least one filter or score plugin")
    if errors:
        raise ArgsError(errors)
    return profile


def load_config(path: pathlib.Path, registry: Registry) -> Profile:
    """Read and decode a config file; raises ArgsError."""
    try:
        text = path.read_text()
    except OSError as err:
        raise ArgsError([f"{path}: cannot read the config file: {err.strerror}"]) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ArgsError([f"{path}: not valid YAML: {err}"]) from None
    return decode_config(raw if raw is not None else {}, registry)
