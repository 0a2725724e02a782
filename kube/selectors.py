"""Label selectors, node selectors and the string selector syntax, parsed once.

Used by `kube.objects` (pod affinity terms, spread constraints, required node
affinity), by `kube.scheduling` (node fit) and by the descheduler (its
`nodeSelector` option is a string such as ``"a=b,c!=d,e in (x,y),!f"``).

Semantics follow apimachinery's `labels.Requirement.Matches` and the scheduler's
node affinity:

- In / NotIn / Exists / DoesNotExist as usual; NotIn and DoesNotExist match a
  missing label. Gt / Lt need the label and compare both sides as integers; a
  label value that is not an integer does not match.
- An empty `LabelSelector` ({}) matches everything. A *missing* selector (None
  from the API) matches nothing: that is `LabelSelectorAsSelector(nil)`, used for
  pod (anti-)affinity terms and topology spread constraints. `LabelSelector.
  from_api(None)` therefore returns `NOTHING`.
- A `NodeSelector` ORs its terms and ANDs the expressions and fields inside a
  term; a term with neither matches no node, and neither does an empty list of
  terms. `matchFields` supports only `metadata.name`.

Malformed selectors raise `ValueError` naming the offending field path.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "EVERYTHING",
    "NOTHING",
    "LabelSelector",
    "NodeSelector",
    "NodeSelectorTerm",
    "Operator",
    "Requirement",
    "parse_selector",
]


class Operator(enum.StrEnum):
    """Selector operators, spelled as in the API."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


_SET_OPS: Final = frozenset({Operator.IN, Operator.NOT_IN})
_NUMERIC_OPS: Final = frozenset({Operator.GT, Operator.LT})
_LABEL_SELECTOR_OPS: Final = frozenset(Operator) - _NUMERIC_OPS
_INT_RE = re.compile(r"[+-]?[0-9]+")
_NAME_RE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_PREFIX_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _check_key(key: str, path: str) -> None:
    prefix, _, name = key.rpartition("/")
    ok = 0 < len(name) <= 63 and _NAME_RE.fullmatch(name) is not None
    if "/" in key:
        ok = ok and 0 < len(prefix) <= 253 and _PREFIX_RE.fullmatch(prefix) is not None
    if not ok:
        raise ValueError(f"{path}: invalid label key {key!r}")


@dataclass(frozen=True, slots=True)
class Requirement:
    """One `key operator values` clause."""

    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    @classmethod
    def build(
        cls, key: str, operator: str, values: Iterable[str], path: str, *, numeric: bool = True
    ) -> Requirement:
        """A validated requirement; `path` names the field in error messages."""
        try:
            op = Operator(operator)
        except ValueError:
            raise ValueError(f"{path}.operator: unknown operator {operator!r}") from None
        if op in _NUMERIC_OPS and not numeric:
            raise ValueError(f"{path}.operator: {op} is not allowed in a label selector")
        vals = list(values)
        if op in _SET_OPS and not vals:
            raise ValueError(f"{path}.values: must be non-empty for {op}")
        if op in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and vals:
            raise ValueError(f"{path}.values: must be empty for {op}")
        if op in _NUMERIC_OPS and (len(vals) != 1 or not _INT_RE.fullmatch(vals[0])):
            raise ValueError(f"{path}.values: {op} needs exactly one integer value")
        if not isinstance(key, str) or not key:
            raise ValueError(f"{path}.key: must be a non-empty string")
        return cls(key, op, frozenset(vals))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a label set satisfies this requirement."""
        op = self.operator
        if op is Operator.IN:
            return labels.get(self.key) in self.values
        if op is Operator.NOT_IN:
            return labels.get(self.key) not in self.values
        if op is Operator.EXISTS:
            return self.key in labels
        if op is Operator.DOES_NOT_EXIST:
            return self.key not in labels
        value = labels.get(self.key)
        if value is None or not _INT_RE.fullmatch(value):
            return False
        (bound,) = self.values
        return int(value) > int(bound) if op is Operator.GT else int(value) < int(bound)

    def __str__(self) -> str:
        values = sorted(self.values)
        match self.operator:
            case Operator.IN if len(values) == 1:
                return f"{self.key}={values[0]}"
            case Operator.NOT_IN if len(values) == 1:
                return f"{self.key}!={values[0]}"
            case Operator.IN | Operator.NOT_IN:
                word = "in" if self.operator is Operator.IN else "notin"
                return f"{self.key} {word} ({','.join(values)})"
            case Operator.EXISTS:
                return self.key
            case Operator.DOES_NOT_EXIST:
                return f"!{self.key}"
            case _:
                return f"{self.key}{'>' if self.operator is Operator.GT else '<'}{values[0]}"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed selector: all requirements must hold. See the module docstring for None."""

    requirements: tuple[Requirement, ...] = ()
    matches_nothing: bool = False

    @classmethod
    def from_api(cls, raw: Mapping[str, Any] | None, path: str = "labelSelector") -> LabelSelector:
        """Parse a metav1.LabelSelector dict (`matchLabels`, `matchExpressions`)."""
        if raw is None:
            return NOTHING
        reqs = [
            Requirement.build(k, "In", [v], f"{path}.matchLabels[{k}]", numeric=False)
            for k, v in (raw.get("matchLabels") or {}).items()
        ]
        for i, expr in enumerate(raw.get("matchExpressions") or ()):
            where = f"{path}.matchExpressions[{i}]"
            reqs.append(
                Requirement.build(
                    expr.get("key", ""),
                    expr.get("operator", ""),
                    expr.get("values") or (),
                    where,
                    numeric=False,
                )
            )
        return cls(tuple(reqs)) if reqs else EVERYTHING

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a label set is selected."""
        if self.matches_nothing:
            return False
        return all(r.matches(labels) for r in self.requirements)

    @property
    def is_everything(self) -> bool:
        """True for the empty selector, which selects every object."""
        return not self.requirements and not self.matches_nothing

    def __str__(self) -> str:
        if self.matches_nothing:
            return "<nothing>"
        return ",".join(str(r) for r in self.requirements)


EVERYTHING: Final = LabelSelector()
NOTHING: Final = LabelSelector(matches_nothing=True)

_TOKEN_RE = re.compile(r"\s*(?:(?P<op>==|!=|=|!|\(|\)|,|>|<)|(?P<word>[^\s=!(),<>]+))")


def _tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if match is None or match.end() == pos:
            if text[pos:].strip() == "":
                break
            raise ValueError(f"invalid selector {text!r}: unexpected {text[pos:]!r}")
        tokens.append(match["op"] or match["word"])
        pos = match.end()
    return tokens


def parse_selector(text: str) -> LabelSelector:
    """Parse the string syntax of `labels.Parse` ("a=b,c!=d,e in (x,y),!f,g>3").

    An empty string selects everything. Raises `ValueError` naming the input.
    """
    tokens = _Tokens(text)
    reqs: list[Requirement] = []
    while tokens.more():
        reqs.append(_requirement(tokens))
        if tokens.more():
            if tokens.take() != ",":
                raise tokens.error("expected ','")
            if not tokens.more():
                raise tokens.error("trailing ','")
    return LabelSelector(tuple(reqs)) if reqs else EVERYTHING


_PUNCTUATION = frozenset({"==", "!=", "=", "!", "(", ")", ",", ">", "<"})


class _Tokens:
    """A cursor over a selector's tokens; its errors name the whole selector."""

    __slots__ = ("_i", "_tokens", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._tokens = _tokenize(text)
        self._i = 0

    def more(self) -> bool:
        return self._i < len(self._tokens)

    def peek(self) -> str | None:
        return self._tokens[self._i] if self.more() else None

    def take(self) -> str:
        if not self.more():
            raise self.error("unexpected end")
        self._i += 1
        return self._tokens[self._i - 1]

    def word_next(self) -> bool:
        """Whether the next token is a key or a value (not punctuation, not the end)."""
        token = self.peek()
        return token is not None and token not in _PUNCTUATION

    def error(self, what: str) -> ValueError:
        return ValueError(f"invalid selector {self.text!r}: {what}")


def _requirement(tokens: _Tokens) -> Requirement:
    """One requirement: `!key`, `key`, `key=v`, `key!=v`, `key>n`, `key in (a,b)`..."""
    negated = tokens.peek() == "!"
    if negated:
        tokens.take()
    key = tokens.take()
    if key in _PUNCTUATION:
        raise tokens.error(f"expected a key, got {key!r}")
    _check_key(key, f"selector {tokens.text!r}")
    nxt = tokens.peek()
    if negated or nxt in (None, ","):
        op, values = ("DoesNotExist" if negated else "Exists"), []
    elif nxt in ("=", "==", "!="):
        tokens.take()
        op = "NotIn" if nxt == "!=" else "In"
        values = [tokens.take()] if tokens.word_next() else [""]
    elif nxt in (">", "<"):
        tokens.take()
        op, values = ("Gt" if nxt == ">" else "Lt"), [tokens.take()]
    elif nxt in ("in", "notin"):
        tokens.take()
        op, values = ("In" if nxt == "in" else "NotIn"), _set_values(tokens, nxt)
    else:
        raise tokens.error(f"unexpected {nxt!r} after {key!r}")
    return Requirement.build(key, op, values, f"selector {tokens.text!r}")


def _set_values(tokens: _Tokens, operator: str) -> list[str]:
    """The `(a,b)` after `in` / `notin`: "()" is empty, "(x,)" adds ""."""
    if tokens.take() != "(":
        raise tokens.error(f"expected '(' after {operator}")
    values: list[str] = []
    closer = tokens.take() if tokens.peek() == ")" else ","
    while closer == ",":
        values.append(tokens.take() if tokens.word_next() else "")
        closer = tokens.take()
    if closer != ")":
        raise tokens.error("expected ',' or ')'")
    return values


_NODE_FIELDS: Final = frozenset({"metadata.name"})


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One node selector term: every expression (labels) and field must match."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    @classmethod
    def from_api(cls, raw: Mapping[str, Any], path: str = "nodeSelectorTerm") -> NodeSelectorTerm:
        """Parse a v1.NodeSelectorTerm dict (`matchExpressions`, `matchFields`)."""
        exprs = _node_requirements(raw.get("matchExpressions"), f"{path}.matchExpressions")
        fields = _node_requirements(raw.get("matchFields"), f"{path}.matchFields")
        for i, req in enumerate(fields):
            if req.key not in _NODE_FIELDS:
                raise ValueError(
                    f"{path}.matchFields[{i}].key: unsupported field {req.key!r}"
                    " (only metadata.name)"
                )
            if req.operator not in _SET_OPS:
                raise ValueError(f"{path}.matchFields[{i}].operator: must be In or NotIn")
        return cls(exprs, fields)

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        """Whether a node with these labels and name satisfies the term."""
        if not self.expressions and not self.fields:
            return False  # an empty term selects no node (scheduler semantics)
        field_set = {"metadata.name": node_name}
        return all(r.matches(labels) for r in self.expressions) and all(
            r.matches(field_set) for r in self.fields
        )


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """`requiredDuringSchedulingIgnoredDuringExecution` of a node affinity: ORed terms."""

    terms: tuple[NodeSelectorTerm, ...]

    @classmethod
    def from_api(cls, raw: Mapping[str, Any], path: str = "nodeSelector") -> NodeSelector:
        """Parse a v1.NodeSelector dict (`nodeSelectorTerms`)."""
        terms = [
            NodeSelectorTerm.from_api(term, f"{path}.nodeSelectorTerms[{t}]")
            for t, term in enumerate(raw.get("nodeSelectorTerms") or ())
        ]
        return cls(tuple(terms))

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        """Whether any term matches the node."""
        return any(term.matches(labels, node_name) for term in self.terms)


def _node_requirements(
    raw: Sequence[Mapping[str, Any]] | None, path: str
) -> tuple[Requirement, ...]:
    return tuple(
        Requirement.build(
            expr.get("key", ""), expr.get("operator", ""), expr.get("values") or (), f"{path}[{i}]"
        )
        for i, expr in enumerate(raw or ())
    )
