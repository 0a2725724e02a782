"""make e2e-matrix's bookkeeping: JUnit counts, and the docs table it keeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed import controlplane, e2ematrix

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="2" skipped="3" tests="20" time="600.0">
</testsuite></testsuites>
"""


def test_counts_read_a_pytest_junit_report(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    report.write_text(JUNIT)
    assert e2ematrix.counts(report) == (14, 3, 3)


def outcome(minor: str, *, failed: int = 0) -> e2ematrix.Outcome:
    return e2ematrix.Outcome(minor, f"v{minor}.4", 30, failed, 0, 1500.0, "2026-11-28", "abc1234")


DOC = f"""# Kubernetes versions

before

{e2ematrix.START}
{e2ematrix.HEADER}
| 1.37 | v1.37.2 | **passes**: 31 passed, 0 failed, 0 skipped | 24 min | 2026-11-01, 0000000 |
| 1.35 | v1.35.4 | **fails**: 29 passed, 2 failed, 0 skipped | 25 min | 2026-11-01, 0000000 |
{e2ematrix.END}

after
"""


def test_a_run_replaces_its_minors_rows_and_keeps_the_others() -> None:
    written = e2ematrix.write_rows(DOC, [outcome("1.34"), outcome("1.35", failed=1)])
    table = written.split(e2ematrix.START)[1].split(e2ematrix.END)[0].strip().splitlines()
    assert table[:2] == e2ematrix.HEADER.splitlines()
    assert [row.split(" | ")[0] for row in table[2:]] == ["| 1.37", "| 1.35", "| 1.34"]
    assert table[2].endswith("2026-11-01, 0000000 |")  # kept
    assert (
        table[3]
        == "| 1.35 | v1.35.4 | **fails**: 30 passed, 1 failed, 0 skipped | 25 min | 2026-11-28, abc1234 |"
    )
    assert "**passes**: 30 passed" in table[4]
    assert written.startswith("# Kubernetes versions\n\nbefore\n") and written.endswith("after\n")
    assert e2ematrix.write_rows(written, [outcome("1.34")]) == written  # idempotent


def test_a_doc_without_the_markers_is_refused_naming_them() -> None:
    with pytest.raises(SystemExit, match="lacks the markers"):
        e2ematrix.write_rows("# no table\n", [outcome("1.34")])


def test_the_docs_page_holds_the_markers_and_a_row_per_supported_minor() -> None:
    """docs/compatibility.md is the table the runs write: every minor hack/ builds has its row."""
    doc = e2ematrix.DOC.read_text()
    table = doc.split(e2ematrix.START)[1].split(e2ematrix.END)[0]
    minors = [line.split(" | ")[0].removeprefix("| ") for line in table.strip().splitlines()[2:]]
    assert sorted(minors) == sorted(controlplane.supported_minors())


def test_unknown_minors_are_refused_naming_the_supported_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        e2ematrix.main(["--minors", "1.33,1.34"])
    assert exited.value.code == 2
    assert (
        "--minors: 1.33 not supported; pick from 1.34, 1.35, 1.36, 1.37" in capsys.readouterr().err
    )


def test_each_minor_has_an_exact_pinned_release() -> None:
    assert [e2ematrix.pinned_version(m) for m in controlplane.supported_minors()] == [
        "v1.34.4", "v1.35.4", "v1.36.3", "v1.37.2",
    ]  # fmt: skip
