"""Hypothesis strategies for outside input: JSON values, quantity- and duration-like
text, and mutations of a valid document (one field replaced by anything)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

# Scalars a JSON or YAML decoder can hand us, including the awkward ones.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["", "0", "-1", "1e400", "NaN", "100m", "5m0s", "1Gi", "true", "null"]),
)

json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=12), inner, max_size=4),
    ),
    max_leaves=12,
)

_DIGITS = st.text(alphabet="0123456789", max_size=25)

quantity_text = st.one_of(
    st.builds(
        lambda sign, whole, dot, frac, suffix: f"{sign}{whole}{dot}{frac}{suffix}",
        st.sampled_from(["", "+", "-"]),
        _DIGITS,
        st.sampled_from(["", "."]),
        _DIGITS,
        st.one_of(
            st.sampled_from(["", *"numkMGTPE", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "x", "mi"]),
            st.builds(
                lambda e, s, n: f"{e}{s}{n}",
                st.sampled_from("eE"),
                st.sampled_from(["", "+", "-"]),
                st.integers(0, 10**12).map(str),
            ),
        ),
    ),
    st.text(max_size=30),
)

_UNITS = ["ns", "us", "\u00b5s", "\u03bcs", "ms", "s", "m", "h", "d", "", "S", "mss"]

duration_text = st.one_of(
    st.builds(
        lambda sign, terms: sign + "".join(terms),
        st.sampled_from(["", "+", "-"]),
        st.lists(
            st.builds(
                lambda whole, dot, frac, unit: f"{whole}{dot}{frac}{unit}",
                _DIGITS,
                st.sampled_from(["", "."]),
                _DIGITS,
                st.sampled_from(_UNITS),
            ),
            max_size=4,
        ),
    ),
    st.text(max_size=30),
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            found += _paths(value, (*prefix, index))
    return found


@st.composite
def mutated(draw: st.DrawFn, base: Any, values: st.SearchStrategy[Any] = json_values) -> Any:
    """`base` with up to three fields (or whole sub-trees) replaced, dropped or added."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(doc)))
        if not path:
            return draw(values)
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        action = draw(st.sampled_from(["replace", "drop", "add"]))
        if action == "drop":
            del parent[path[-1]]
        elif action == "add" and isinstance(parent[path[-1]], dict):
            parent[path[-1]][draw(st.text(max_size=12))] = draw(values)
        else:
            parent[path[-1]] = draw(values)
    return doc
