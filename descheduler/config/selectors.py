"""Label selectors in both wire forms, decoded into `kube.selectors.LabelSelector`.

Koordinator writes selectors as `metav1.LabelSelector` mappings (`matchLabels`,
`matchExpressions`); kubernetes-sigs/descheduler and MigrationController write
strings in `labels.Parse` syntax (`"zone=a,tier in (web,api),!gpu"`). Both become
the `kube.selectors.LabelSelector` that plugins match pods and nodes with.

`kube.selectors` owns the semantics; this module adds what a config file needs on
top: strict structure (unknown keys, wrong types) and label key/value syntax,
reported with field paths.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from descheduler.config import codecs, fields
from kube import selectors as kube_selectors
from kube.configstruct import Errors, FieldPath, Invalid, Reported, describe

LabelSelector = kube_selectors.LabelSelector

_NAME_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_PREFIX_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SELECTOR_KEYS = ("matchLabels", "matchExpressions")
_REQUIREMENT_KEYS = ("key", "operator", "values")


def check_key(key: str) -> None:
    """Kubernetes qualified-name rules for a label key (`[prefix/]name`)."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _PREFIX_RE.fullmatch(prefix)):
        raise Invalid(f"invalid label key {key!r}: the prefix must be a DNS subdomain")
    if not name or len(name) > 63 or not _NAME_RE.fullmatch(name):
        raise Invalid(
            f"invalid label key {key!r}: the name must be 1-63 characters of [A-Za-z0-9-_.], "
            "starting and ending with a letter or digit"
        )


def check_value(value: str) -> None:
    """Kubernetes label value rules (empty is allowed)."""
    if value and (len(value) > 63 or not _NAME_RE.fullmatch(value)):
        raise Invalid(
            f"invalid label value {value!r}: must be at most 63 characters of [A-Za-z0-9-_.], "
            "starting and ending with a letter or digit"
        )


def _kube_error(errors: Errors, fallback: FieldPath, err: ValueError) -> None:
    """kube.selectors messages read "<path>: <problem>" for the path it was given."""
    where, sep, message = str(err).partition(": ")
    if sep and where.startswith(str(fallback)):
        errors.add(where, message)
    else:
        errors.add(fallback, str(err))


def _strings(raw: object, path: FieldPath, errors: Errors) -> list[str] | None:
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        errors.add(path, f"must be a list of strings, not {describe(raw)}")
        return None
    return list(raw)


class SelectorMapping(codecs.Codec[LabelSelector]):
    """A `metav1.LabelSelector` mapping; written back as `matchExpressions` only."""

    __slots__ = ()

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> LabelSelector:
        if not isinstance(raw, Mapping):
            raise Invalid(
                f"must be a mapping with matchLabels/matchExpressions, not {describe(raw)}"
            )
        before = len(errors)
        for key in raw:
            if key not in _SELECTOR_KEYS:
                errors.add(path.child(str(key)), fields.unknown_field(str(key), _SELECTOR_KEYS))
        requirements = [*self._labels(raw.get("matchLabels"), path.child("matchLabels"), errors)]
        expressions = raw.get("matchExpressions")
        if expressions is not None and not isinstance(expressions, list):
            errors.add(
                path.child("matchExpressions"), f"must be a list, not {describe(expressions)}"
            )
        for position, expression in enumerate(expressions if isinstance(expressions, list) else []):
            requirement = self._expression(
                expression, path.child("matchExpressions").index(position), errors
            )
            if requirement is not None:
                requirements.append(requirement)
        if len(errors) > before:
            raise Reported
        return LabelSelector(tuple(requirements))

    @staticmethod
    def _labels(raw: object, path: FieldPath, errors: Errors) -> list[kube_selectors.Requirement]:
        if raw is None:
            return []
        if not isinstance(raw, Mapping):
            errors.add(path, f"must be a mapping of label to value, not {describe(raw)}")
            return []
        requirements = []
        for key, value in raw.items():
            try:
                if not isinstance(key, str) or not isinstance(value, str):
                    raise Invalid(f"labels and values must be strings (got {key!r}: {value!r})")
                check_key(key)
                check_value(value)
            except Invalid as err:
                errors.add(path.key(str(key)), err.message)
                continue
            requirements.append(
                kube_selectors.Requirement(key, kube_selectors.Operator.IN, frozenset({value}))
            )
        return requirements

    @staticmethod
    def _expression(
        raw: object, path: FieldPath, errors: Errors
    ) -> kube_selectors.Requirement | None:
        if not isinstance(raw, Mapping):
            errors.add(
                path, f"must be a mapping with key, operator and values, not {describe(raw)}"
            )
            return None
        for key in raw:
            if key not in _REQUIREMENT_KEYS:
                errors.add(path.child(str(key)), fields.unknown_field(str(key), _REQUIREMENT_KEYS))
        key, operator = raw.get("key"), raw.get("operator")
        values = _strings(raw.get("values") or [], path.child("values"), errors)
        try:
            if not isinstance(key, str):
                raise Invalid("required: a label key")
            check_key(key)
        except Invalid as err:
            errors.add(path.child("key"), err.message)
            return None
        if not isinstance(operator, str):
            errors.add(path.child("operator"), "required: one of In, NotIn, Exists, DoesNotExist")
            return None
        if values is None:
            return None
        for position, value in enumerate(values):
            try:
                check_value(value)
            except Invalid as err:
                errors.add(path.child("values").index(position), err.message)
                return None
        try:
            return kube_selectors.Requirement.build(key, operator, values, str(path), numeric=False)
        except ValueError as err:
            _kube_error(errors, path, err)
            return None

    def encode(self, value: LabelSelector) -> object:
        expressions = []
        for requirement in value.requirements:
            expression: dict[str, object] = {
                "key": requirement.key,
                "operator": requirement.operator.value,
            }
            if requirement.values:
                expression["values"] = sorted(requirement.values)
            expressions.append(expression)
        return {"matchExpressions": expressions} if expressions else {}


class SelectorString(codecs.Codec[LabelSelector]):
    """A selector string (upstream `nodeSelector`, MigrationController `nodeSelector`)."""

    __slots__ = ()

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> LabelSelector:
        if not isinstance(raw, str):
            raise Invalid(f'must be a selector string such as "zone=a,!gpu", not {describe(raw)}')
        try:
            return kube_selectors.parse_selector(raw)
        except ValueError as err:
            raise Invalid(str(err)) from None

    def encode(self, value: LabelSelector) -> object:
        return str(value)


class SelectorStringOrMapping(codecs.Codec[LabelSelector]):
    """Either form (the top-level `nodeSelector`: a string upstream, a mapping in
    Koordinator). Written back as a string, the one form that can hold Gt/Lt."""

    __slots__ = ()

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> LabelSelector:
        if isinstance(raw, str):
            return STRING.decode(raw, path, errors)
        return MAPPING.decode(raw, path, errors)

    def encode(self, value: LabelSelector) -> object:
        return str(value)


MAPPING: codecs.Codec[LabelSelector] = SelectorMapping()
STRING: codecs.Codec[LabelSelector] = SelectorString()
EITHER: codecs.Codec[LabelSelector] = SelectorStringOrMapping()
