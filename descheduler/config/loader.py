"""Loading a DeschedulerConfiguration: one ordered, pure pipeline.

    text --yaml.safe_load--> raw data --decode--> typed objects --validate--> return

Nothing here talks to a cluster. Every problem from every stage after YAML parsing
is collected; the caller gets either a fully defaulted `DeschedulerConfiguration`
or one `ConfigError` listing all problems with their field paths.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Mapping

import yaml

from descheduler.config import fields
from descheduler.config.catalog import PluginSpec
from descheduler.config.model import ConfigKind, DeschedulerConfiguration
from descheduler.config.profiles import decode_profiles
from kube.configstruct import ConfigError, Errors, FieldError

ACCEPTED_KINDS = tuple(kind.value for kind in ConfigKind)


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key given twice in one mapping.

    PyYAML keeps the last value silently; Go's strict decoding (which both
    reference descheduler use) refuses the file, and so do we.
    """


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[object, object]:
    seen: set[object] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str | int | float | bool):
            continue  # unhashable keys are construct_mapping's to reject
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key!r}",
                key_node.start_mark,
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml(text: str, origin: str = "") -> object:
    """The YAML document as plain data; a syntax error becomes one error with line and column."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        problem = err.problem or err.context or "invalid YAML"
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ConfigError([FieldError(origin, f"{where}{problem}")]) from err
    except yaml.YAMLError as err:
        raise ConfigError([FieldError(origin, f"invalid YAML: {err}")]) from err


def decode_configuration(
    raw: object, *, plugins: Mapping[str, PluginSpec]
) -> DeschedulerConfiguration:
    """Typed, defaulted and validated configuration from already-parsed YAML data.

    `plugins` is the catalog profiles are checked against (`Registry.catalog()`).
    """
    catalog = plugins
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        hint = " (to load a file, pass a pathlib.Path)" if isinstance(raw, str) else ""
        raise ConfigError(
            [
                FieldError(
                    "", f"the configuration must be a YAML mapping, not {type(raw).__name__}{hint}"
                )
            ]
        )
    errors = Errors()
    api_version = raw.get("apiVersion")
    if api_version is None:
        errors.add("apiVersion", f'required; must be "{fields.API_VERSION}"')
    elif api_version != fields.API_VERSION:
        errors.add("apiVersion", f'must be "{fields.API_VERSION}" (got {api_version!r})')
    kind = ConfigKind.KOORDINATOR
    raw_kind = raw.get("kind")
    if raw_kind is None:
        errors.add("kind", f"required; one of: {', '.join(ACCEPTED_KINDS)}")
    elif raw_kind not in ACCEPTED_KINDS:
        errors.add("kind", f"must be one of: {', '.join(ACCEPTED_KINDS)} (got {raw_kind!r})")
    else:
        kind = ConfigKind(raw_kind)
    top = fields.decode_object(
        DeschedulerConfiguration,
        raw,
        fields.ROOT,
        errors,
        handled=("apiVersion", "kind", "profiles"),
    )
    profiles = decode_profiles(
        raw.get("profiles"), fields.ROOT.child("profiles"), errors, kind, catalog
    )
    errors.raise_if_any()
    return dataclasses.replace(top, kind=kind, profiles=profiles)


def load_config(
    source: str | os.PathLike[str], *, plugins: Mapping[str, PluginSpec]
) -> DeschedulerConfiguration:
    """Load a configuration from a file (`pathlib.Path`) or from YAML text (`str`).

    `plugins` is the catalog profiles are checked against (`Registry.catalog()`
    of `descheduler.plugins.registry()`). Raises `ConfigError` listing every
    problem.
    """
    origin = ""
    if isinstance(source, os.PathLike):
        origin = os.fspath(source)
        try:
            text = pathlib.Path(source).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError([FieldError(origin, "no such file")]) from None
        except (OSError, UnicodeDecodeError) as err:
            raise ConfigError([FieldError(origin, f"cannot read: {err}")]) from err
    else:
        text = source
    return decode_configuration(parse_yaml(text, origin), plugins=plugins)


def default_configuration(
    kind: ConfigKind = ConfigKind.KOORDINATOR, *, plugins: Mapping[str, PluginSpec]
) -> DeschedulerConfiguration:
    """What an empty file of `kind` means."""
    return decode_configuration(
        {"apiVersion": fields.API_VERSION, "kind": kind.value}, plugins=plugins
    )


def dump_config(config: DeschedulerConfiguration) -> str:
    """The configuration as YAML text (`--write-config-to`)."""
    return yaml.safe_dump(config.to_mapping(), sort_keys=False, default_flow_style=False)
