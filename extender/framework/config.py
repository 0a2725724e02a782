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
from dataclasses import dataclass, field
from typing import Any

import yaml

from extender.framework.interfaces import GROUP, ArgsError, ExtensionPoint
from extender.framework.registry import Registry
from kube import configcodecs as codecs
from kube import configstruct
from kube.configstruct import Errors, FieldPath, spec

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

    name: str = field(default="", metadata=spec("name", codecs.NAME, required=True))
    weight: int = field(default=1, metadata=spec("weight", codecs.Integer(minimum=1, maximum=100)))
    # filter only: its failure refuses the nodes instead of skipping it
    required: bool = field(default=False, metadata=spec("required", codecs.BOOL))


_ALLOWED = {ExtensionPoint.FILTER: {"name", "required"}, ExtensionPoint.SCORE: {"name", "weight"}}


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


def _unknown(name: str, registry: Registry) -> str:
    known = ", ".join(sorted(n for n in registry if registry.get(n).error is None))  # type: ignore[union-attr]
    return (
        f'unknown scheduler plugin "{name}": install the package that declares it in the'
        f' entry-point group "{GROUP}" next to nodeqos (known plugins: {known})'
    )


def _decode_enabled(
    raw: object, path: FieldPath, point: ExtensionPoint, registry: Registry, errors: Errors
) -> tuple[Enabled, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        errors.add(path, f"must be a map with 'enabled' (got {type(raw).__name__})")
        return ()
    for key in raw:
        if key != "enabled":
            hint = "; a plugin is off unless listed in enabled" if key == "disabled" else ""
            errors.add(path.child(key), f"unknown field; known fields are enabled{hint}")
    items = raw.get("enabled") or []
    if not isinstance(items, list):
        errors.add(path.child("enabled"), "must be a list of {name: ...}")
        return ()
    found: list[Enabled] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        where = path.child("enabled").index(index)
        if not isinstance(item, Mapping):
            errors.add(where, "must be a map such as {name: LoadAwareScheduling}")
            continue
        allowed = _ALLOWED[point]
        for key in (k for k in item if k not in allowed):
            known = ", ".join(sorted(allowed))
            errors.add(where.child(str(key)), f"unknown field at {point}; known fields are {known}")
        known_only = {k: v for k, v in item.items() if k in allowed}
        entry = configstruct.decode_object(Enabled, known_only, where, errors)
        name = entry.name
        if not name:  # missing or not a name: reported by the decoder
            continue
        if name in seen:
            errors.add(where.child("name"), f"{name} is enabled twice at {point}")
            continue
        seen.add(name)
        plugin = registry.get(name)
        if plugin is None:
            errors.add(where.child("name"), _unknown(name, registry))
        elif plugin.error is not None:
            errors.add(where.child("name"), plugin.error)
        elif point not in plugin.extension_points:
            points = ", ".join(sorted(plugin.extension_points))
            errors.add(
                where.child("name"), f"plugin {name} does not implement {point} (only {points})"
            )
        else:
            found.append(entry)
    return tuple(found)


def _decode_profile(raw: object, path: FieldPath, registry: Registry, errors: Errors) -> Profile:
    if not isinstance(raw, Mapping):
        errors.add(path, "must be a map with plugins and pluginConfig")
        return Profile((), (), {})
    for key in raw:
        if key not in ("name", "schedulerName", "plugins", "pluginConfig"):
            errors.add(
                path.child(key), "unknown field; known fields are name, plugins, pluginConfig"
            )
    name = raw.get("name") or raw.get("schedulerName") or ""
    filters, scores = _decode_points(raw.get("plugins") or {}, path, registry, errors)
    enabled = {e.name for e in (*filters, *scores)}
    decoded = _decode_configs(raw.get("pluginConfig") or [], enabled, path, registry, errors)
    return Profile(
        filters, scores, {k: v for k, v in decoded.items() if v is not None}, False, str(name)
    )


def _decode_points(
    plugins: object, path: FieldPath, registry: Registry, errors: Errors
) -> tuple[tuple[Enabled, ...], tuple[Enabled, ...]]:
    """A profile's `plugins`: the enabled filter and score plugins (other points refused)."""
    filters: tuple[Enabled, ...] = ()
    scores: tuple[Enabled, ...] = ()
    if not isinstance(plugins, Mapping):
        errors.add(path.child("plugins"), "must be a map of extension point to plugin set")
        return filters, scores
    for point, value in plugins.items():
        where = path.child("plugins").child(str(point))
        if point == ExtensionPoint.FILTER:
            filters = _decode_enabled(value, where, ExtensionPoint.FILTER, registry, errors)
        elif point == ExtensionPoint.SCORE:
            scores = _decode_enabled(value, where, ExtensionPoint.SCORE, registry, errors)
        elif point in _UNSERVABLE:
            errors.add(
                where,
                f"the extender serves filter and score only ({_UNSERVABLE[point]}; see {GUIDE})",
            )
        else:
            errors.add(where, "unknown extension point; known points are filter, score")
    return filters, scores


def _decode_configs(
    configs: object, enabled: set[str], path: FieldPath, registry: Registry, errors: Errors
) -> dict[str, object]:
    """A profile's `pluginConfig`, then the default args of every enabled plugin it leaves out."""
    decoded: dict[str, object] = {}
    if not isinstance(configs, list):
        errors.add(path.child("pluginConfig"), "must be a list of {name, args}")
        configs = []
    for index, item in enumerate(configs):
        where = path.child("pluginConfig").index(index)
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            errors.add(where, "must be a map with name and args")
            continue
        for key in item:
            if key not in ("name", "args"):
                errors.add(where.child(key), "unknown field; known fields are name, args")
        plugin = item["name"]
        entry = registry.get(plugin)
        if entry is None:
            errors.add(where.child("name"), _unknown(plugin, registry))
            continue
        if plugin in decoded:
            errors.add(where.child("name"), f"a second pluginConfig for {plugin}")
            continue
        if entry.args is None:  # broken: reported where it is enabled
            continue
        decoded[plugin] = _decode_args(entry.args, item.get("args"), where.child("args"), errors)
    for plugin in sorted(enabled - decoded.keys()):
        entry = registry.get(plugin)
        if entry is not None and entry.args is not None:
            where = path.child("pluginConfig").named(plugin)
            decoded[plugin] = _decode_args(entry.args, {}, where, errors)
    return decoded


def _decode_args(cls: type, raw: object, path: FieldPath, errors: Errors) -> object | None:
    try:
        decoded: object = cls.from_mapping({} if raw is None else raw, str(path))  # type: ignore[attr-defined]
        return decoded
    except ArgsError as err:  # plugins report "path: what" lines: kept as they are
        errors.extend(configstruct.FieldError("", problem) for problem in err.problems)
    except Exception as err:  # a third party's decoder: report it as a problem, never crash
        errors.add(path, f"the plugin's Args.from_mapping failed: {type(err).__name__}: {err}")
    return None


def decode_config(raw: object, registry: Registry) -> Profile:
    """The profile of a parsed document; raises ArgsError listing every problem."""
    errors = Errors()
    if not (isinstance(raw, Mapping) and raw.get("kind") == KIND):
        entry = registry.get(LEGACY_PLUGIN)
        assert entry is not None and entry.args is not None, "LoadAwareScheduling is in-tree"
        args = entry.args.from_mapping(raw, "")  # type: ignore[attr-defined]
        plugin = (Enabled(LEGACY_PLUGIN),)
        return Profile(plugin, plugin, {LEGACY_PLUGIN: args}, legacy=True)
    for key in raw:
        if key not in ("apiVersion", "kind", "profiles"):
            errors.add(str(key), "unknown field; known fields are apiVersion, kind, profiles")
    if raw.get("apiVersion") != API_VERSION:
        errors.add("apiVersion", f"must be {API_VERSION} (got {raw.get('apiVersion')!r})")
    profiles: Any = raw.get("profiles")
    profile = Profile((), (), {})
    if not isinstance(profiles, list) or len(profiles) != 1:
        errors.add(
            "profiles",
            "must list exactly one profile (kube-scheduler calls one urlPrefix per extender;"
            " serve a second profile from a second extender)",
        )
    else:
        profile = _decode_profile(profiles[0], FieldPath("profiles").index(0), registry, errors)
        if not profile.filter and not profile.score and not len(errors):
            errors.add("profiles[0].plugins", "enable at least one filter or score plugin")
    if len(errors):
        raise ArgsError([str(error) for error in errors])
    return profile


def read_document(path: pathlib.Path) -> object:
    """The YAML document in a config file (an empty file is `{}`); raises ArgsError.

    The one reader of the extender's config files: the profile file here and a bare
    LoadAwareSchedulingArgs file (`extender.args.load_args`).
    """
    try:
        text = path.read_text()
    except OSError as err:
        raise ArgsError([f"{path}: cannot read the config file: {err.strerror}"]) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ArgsError([f"{path}: not valid YAML: {err}"]) from None
    return raw if raw is not None else {}


def load_config(path: pathlib.Path, registry: Registry) -> Profile:
    """Read and decode a config file; raises ArgsError."""
    return decode_config(read_document(path), registry)
