"""Decoding `profiles[]`: plugin sets merged with the defaults, and per-plugin args.

Merging follows Koordinator's `mergePluginSet` (`default_plugins.go`): the
defaults of a point come first in their own order, minus any named in
`disabled` (`"*"` drops them all); a default named again in `enabled` keeps its
place; every other enabled plugin is appended in file order. Every plugin
enabled anywhere gets Args, decoded from its `pluginConfig` entry or defaulted,
as Koordinator's `setDefaults_Profile` does.

Default plugins depend on the document kind (`model.DEFAULT_PLUGINS`). Unlike
upstream, a profile here can switch DefaultEvictor off with `disabled`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from descheduler.config import fields, selectors
from descheduler.config.catalog import ENTRY_POINT_GROUP, POINT_KEYS, ExtensionPoint, PluginSpec
from descheduler.config.model import DEFAULT_PLUGINS, ConfigKind, Profile
from descheduler.config.selectors import LabelSelector
from kube.configstruct import Errors, FieldPath, Invalid, Reported, describe

DEFAULT_PROFILE_NAME = "koord-descheduler"

_PROFILE_KEYS = ("name", "plugins", "pluginConfig", "nodeSelector")
_SET_KEYS = ("enabled", "disabled")
_CONFIG_KEYS = ("name", "args")

# (plugin name, where it was written)
_Entry = tuple[str, FieldPath]


def decode_profiles(
    raw: object,
    path: FieldPath,
    errors: Errors,
    kind: ConfigKind,
    catalog: Mapping[str, PluginSpec],
) -> tuple[Profile, ...]:
    """Every profile of the document; problems go to `errors`."""
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        errors.add(path, f"must be a list, not {describe(raw)}")
        return ()
    if not raw and kind is ConfigKind.KOORDINATOR:
        raw = [{}]  # Koordinator runs one default profile when none is given.
    profiles: list[Profile] = []
    first_index: dict[str, int] = {}
    for position, raw_profile in enumerate(raw):
        profile_path = path.index(position)
        profile = _decode_profile(
            raw_profile, profile_path, errors, kind, catalog, single=len(raw) == 1
        )
        if profile is None:
            continue
        if profile.name in first_index:
            errors.add(
                profile_path.child("name"),
                f'duplicate profile name "{profile.name}" (also {path.index(first_index[profile.name])})',
            )
        first_index.setdefault(profile.name, position)
        profiles.append(profile)
    return tuple(profiles)


def _decode_profile(
    raw: object,
    path: FieldPath,
    errors: Errors,
    kind: ConfigKind,
    catalog: Mapping[str, PluginSpec],
    *,
    single: bool,
) -> Profile | None:
    if not isinstance(raw, Mapping):
        errors.add(path, f"must be a mapping, not {describe(raw)}")
        return None
    for key in raw:
        if key not in _PROFILE_KEYS:
            errors.add(path.child(str(key)), fields.unknown_field(str(key), _PROFILE_KEYS))
    name = raw.get("name") or ""
    if not isinstance(name, str):
        errors.add(path.child("name"), f"must be a string, not {describe(name)}")
        name = ""
    if not name:
        if kind is ConfigKind.KOORDINATOR and single:
            name = DEFAULT_PROFILE_NAME  # Koordinator names a lone unnamed profile.
        else:
            errors.add(path.child("name"), "required")
    node_selector: LabelSelector | None = None
    if raw.get("nodeSelector") is not None:
        try:
            node_selector = selectors.EITHER.decode(
                raw["nodeSelector"], path.child("nodeSelector"), errors
            )
        except Invalid as err:
            errors.add(path.child("nodeSelector"), err.message)
        except Reported:
            pass
    plugins = _decode_plugins(raw.get("plugins"), path.child("plugins"), errors, kind, catalog)
    config_path = path.child("pluginConfig")
    plugin_config, configured = _decode_plugin_config(
        raw.get("pluginConfig"), config_path, errors, catalog
    )
    for plugin in dict.fromkeys(enabled for names in plugins.values() for enabled in names):
        if plugin in configured or plugin not in catalog:
            continue
        defaults_errors = Errors()
        args = catalog[plugin].args.decode(
            None, config_path.named(plugin).child("args"), defaults_errors
        )
        for error in defaults_errors:
            errors.add(
                error.path, f"{error.message} ({plugin} is enabled but has no pluginConfig entry)"
            )
        if args is not None:
            plugin_config[plugin] = args
    return Profile(
        name=name,
        plugins=MappingProxyType(plugins),
        plugin_config=MappingProxyType(plugin_config),
        node_selector=node_selector,
    )


def _unknown_plugin(name: str, catalog: Mapping[str, PluginSpec]) -> str:
    return (
        f'unknown plugin "{name}"; known plugins: {", ".join(sorted(catalog))}'
        f" (an out-of-tree plugin must be installed in the descheduler's environment,"
        f' its package declaring an entry point "{name}" in group "{ENTRY_POINT_GROUP}")'
    )


def _decode_plugins(
    raw: object,
    path: FieldPath,
    errors: Errors,
    kind: ConfigKind,
    catalog: Mapping[str, PluginSpec],
) -> dict[ExtensionPoint, tuple[str, ...]]:
    written: dict[ExtensionPoint, tuple[list[_Entry], list[_Entry]]] = {}
    if raw is not None and not isinstance(raw, Mapping):
        errors.add(path, f"must be a mapping, not {describe(raw)}")
    elif raw is not None:
        for key, value in raw.items():
            point = POINT_KEYS.get(str(key))
            point_path = path.child(str(key))
            if point is None:
                errors.add(
                    point_path, fields.unknown_field(str(key), [p.value for p in ExtensionPoint])
                )
            elif point in written:
                errors.add(point_path, f"the {point} extension point is given twice")
            else:
                written[point] = _decode_plugin_set(value, point_path, errors, catalog)
    merged: dict[ExtensionPoint, tuple[str, ...]] = {}
    for point in ExtensionPoint:
        defaults = tuple(name for name in DEFAULT_PLUGINS[kind].get(point, ()) if name in catalog)
        enabled, disabled = written.get(point, ([], []))
        _check_enabled(point, enabled, errors, catalog)
        merged[point] = _merge(
            defaults, [name for name, _ in enabled], {name for name, _ in disabled}
        )
    return merged


def _decode_plugin_set(
    raw: object, path: FieldPath, errors: Errors, catalog: Mapping[str, PluginSpec]
) -> tuple[list[_Entry], list[_Entry]]:
    lists: dict[str, list[_Entry]] = {"enabled": [], "disabled": []}
    if raw is None:
        return lists["enabled"], lists["disabled"]
    if not isinstance(raw, Mapping):
        errors.add(path, f"must be a mapping with enabled/disabled lists, not {describe(raw)}")
        return lists["enabled"], lists["disabled"]
    for key, value in raw.items():
        if key not in _SET_KEYS:
            errors.add(path.child(str(key)), fields.unknown_field(str(key), _SET_KEYS))
            continue
        if value is None:
            continue
        if not isinstance(value, list):
            errors.add(path.child(key), f"must be a list, not {describe(value)}")
            continue
        for position, item in enumerate(value):
            entry = _plugin_entry(item, path.child(key).index(position), errors)
            if entry is None:
                continue
            name, name_path = entry
            if name not in catalog and not (key == "disabled" and name == "*"):
                errors.add(name_path, _unknown_plugin(name, catalog))
                continue
            lists[key].append(entry)
    return lists["enabled"], lists["disabled"]


def _plugin_entry(item: object, path: FieldPath, errors: Errors) -> _Entry | None:
    """`{name: X}` (Koordinator) or `X` (kubernetes-sigs/descheduler)."""
    if isinstance(item, str) and item:
        return item, path
    if isinstance(item, Mapping):
        for key in item:
            if key != "name":
                errors.add(path.child(str(key)), fields.unknown_field(str(key), ("name",)))
        name = item.get("name")
        if isinstance(name, str) and name:
            return name, path.child("name")
        errors.add(path.child("name"), "required (a plugin name)")
        return None
    errors.add(path, f"must be a plugin name or {{name: ...}}, not {describe(item)}")
    return None


def _check_enabled(
    point: ExtensionPoint, enabled: list[_Entry], errors: Errors, catalog: Mapping[str, PluginSpec]
) -> None:
    seen: set[str] = set()
    for name, name_path in enabled:
        if name in seen:
            errors.add(name_path, f"plugin {name} is enabled twice at the {point} extension point")
        seen.add(name)
        served = catalog[name].extension_points
        if point not in served:
            errors.add(
                name_path,
                f"plugin {name} cannot run at the {point} extension point; "
                f"it serves: {', '.join(sorted(p.value for p in served))}",
            )


def _merge(defaults: tuple[str, ...], enabled: list[str], disabled: set[str]) -> tuple[str, ...]:
    kept = [] if "*" in disabled else [name for name in defaults if name not in disabled]
    return tuple(dict.fromkeys([*kept, *enabled]))


def _decode_plugin_config(
    raw: object, path: FieldPath, errors: Errors, catalog: Mapping[str, PluginSpec]
) -> tuple[dict[str, fields.PluginArgs], set[str]]:
    """Args per plugin name, and every name that had an entry (even a broken one)."""
    configs: dict[str, fields.PluginArgs] = {}
    first_index: dict[str, int] = {}
    if raw is None:
        return configs, set()
    if not isinstance(raw, list):
        errors.add(path, f"must be a list, not {describe(raw)}")
        return configs, set()
    for position, entry in enumerate(raw):
        entry_path = path.index(position)
        if not isinstance(entry, Mapping):
            errors.add(entry_path, f"must be a mapping with name and args, not {describe(entry)}")
            continue
        for key in entry:
            if key not in _CONFIG_KEYS:
                errors.add(entry_path.child(str(key)), fields.unknown_field(str(key), _CONFIG_KEYS))
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            errors.add(entry_path.child("name"), "required (a plugin name)")
            continue
        if name not in catalog:
            errors.add(entry_path.child("name"), _unknown_plugin(name, catalog))
            continue
        if name in first_index:
            errors.add(
                entry_path.child("name"),
                f"duplicate pluginConfig entry for {name} (first at {path.index(first_index[name])})",
            )
            continue
        first_index[name] = position
        args = catalog[name].args.decode(entry.get("args"), path.named(name).child("args"), errors)
        if args is not None:
            configs[name] = args
    return configs, set(first_index)
