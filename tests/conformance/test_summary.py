"""The suite's bookkeeping: docs/conformance.md summary lines and docs/deviations.md stay true.

Each conformance module names its reference (`TITLE`) and lists every case
table (`ALL`); a case's last value is its `reference.Expect`. docs/conformance.md must
carry the module's summary line exactly, and every deviation a case cites
must be a row of docs/deviations.md.
"""

from __future__ import annotations

import pathlib
import re
from types import ModuleType

import pytest

from tests.conformance import reference as ref
from tests.conformance import (
    test_descheduler_highnodeutilization,
    test_descheduler_interpodantiaffinity,
    test_descheduler_lownodeutilization,
    test_descheduler_lownodeutilization_metrics,
    test_descheduler_nodeaffinity,
    test_descheduler_nodetaints,
    test_descheduler_podlifetime,
    test_descheduler_removeduplicates,
    test_descheduler_removefailedpods,
    test_descheduler_toomanyrestarts,
    test_descheduler_topologyspread,
    test_koordinator_custompriority,
    test_koordinator_fragmentationaware,
    test_koordinator_lownodeload,
    test_koordinator_lownodeload_units,
    test_koordinator_v18_lownodeload,
    test_koordinator_v18_nodepools,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODULES = [
    test_koordinator_lownodeload,
    test_koordinator_lownodeload_units,
    test_descheduler_lownodeutilization,
    test_descheduler_lownodeutilization_metrics,
    test_descheduler_highnodeutilization,
    test_descheduler_podlifetime,
    test_descheduler_nodetaints,
    test_descheduler_removeduplicates,
    test_descheduler_removefailedpods,
    test_descheduler_toomanyrestarts,
    test_descheduler_nodeaffinity,
    test_descheduler_interpodantiaffinity,
    test_descheduler_topologyspread,
    test_koordinator_v18_lownodeload,
    test_koordinator_v18_nodepools,
    test_koordinator_custompriority,
    test_koordinator_fragmentationaware,
]


def expects(module: ModuleType) -> list[ref.Expect]:
    found = []
    for table in module.ALL:
        for param in table:
            expect = param.values[-1]
            assert isinstance(expect, ref.Expect), param.id
            found.append(expect)
    return found


def by_reference() -> dict[str, list[ref.Expect]]:
    """Every case, grouped by the reference test file (a module's TITLE)."""
    found: dict[str, list[ref.Expect]] = {}
    for module in MODULES:
        found.setdefault(module.TITLE, []).extend(expects(module))
    return found


def summary(title: str) -> str:
    rows = by_reference()[title]
    agree = sum(e.agrees for e in rows)
    return (
        f"{title}: {agree} of {len(rows)} table cases agree; "
        f"{len(rows) - agree} differ on purpose, see docs/deviations.md"
    )


@pytest.mark.parametrize("title", sorted({m.TITLE for m in MODULES}))
def test_docs_state_the_summary(title: str) -> None:
    """docs/conformance.md's line for the reference file matches the case tables."""
    assert summary(title) in (ROOT / "docs" / "conformance.md").read_text()


def test_every_cited_deviation_is_documented() -> None:
    """Each deviation key a case cites is a row of docs/deviations.md, and each row is used or says none."""
    text = (ROOT / "docs" / "deviations.md").read_text()
    documented = set(re.findall(r"^\| `([a-z-]+)` \|", text, re.M))
    cited = {e.deviation for rows in by_reference().values() for e in rows if e.deviation}
    assert cited <= documented, cited - documented
