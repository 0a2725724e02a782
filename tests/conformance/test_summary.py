"""The suite's bookkeeping: README summary lines and docs/deviations.md stay true.

Each conformance module names its reference (`TITLE`) and lists every case
table (`ALL`); a case's last value is its `reference.Expect`. The README must
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
    test_descheduler_nodeaffinity,
    test_descheduler_nodetaints,
    test_descheduler_podlifetime,
    test_descheduler_removeduplicates,
    test_descheduler_removefailedpods,
    test_descheduler_toomanyrestarts,
    test_descheduler_topologyspread,
    test_koordinator_lownodeload,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODULES = [
    test_koordinator_lownodeload,
    test_descheduler_lownodeutilization,
    test_descheduler_highnodeutilization,
    test_descheduler_podlifetime,
    test_descheduler_nodetaints,
    test_descheduler_removeduplicates,
    test_descheduler_removefailedpods,
    test_descheduler_toomanyrestarts,
    test_descheduler_nodeaffinity,
    test_descheduler_interpodantiaffinity,
    test_descheduler_topologyspread,
]


def expects(module: ModuleType) -> list[ref.Expect]:
    found = []
    for table in module.ALL:
        for param in table:
            expect = param.values[-1]
            assert isinstance(expect, ref.Expect), param.id
            found.append(expect)
    return found


def summary(module: ModuleType) -> str:
    rows = expects(module)
    agree = sum(e.agrees for e in rows)
    return (
        f"{module.TITLE}: {agree} of {len(rows)} table cases agree; "
        f"{len(rows) - agree} differ on purpose, see docs/deviations.md"
    )


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.TITLE)
def test_readme_states_the_summary(module: ModuleType) -> None:
    """The README's line for the reference file matches the case tables."""
    assert summary(module) in (ROOT / "README.md").read_text()


def test_every_cited_deviation_is_documented() -> None:
    """Each deviation key a case cites is a row of docs/deviations.md, and each row is used or says none."""
    text = (ROOT / "docs" / "deviations.md").read_text()
    documented = set(re.findall(r"^\| `([a-z-]+)` \|", text, re.M))
    cited = {e.deviation for m in MODULES for e in expects(m) if e.deviation}
    assert cited <= documented, cited - documented
