"""`make e2e-matrix`: the real-node e2e suite on each supported Kubernetes minor, and
the table in docs/compatibility.md that says what ran and what passed.

For each minor (oldest first; `--minors 1.34,1.37` picks some) it runs
``pytest -m e2e tests/e2e`` with ``NODEQOS_KUBE_MINOR`` naming the minor, so the
control plane, kube-scheduler, controller manager and the three kubelets are that
minor's (`testbed.controlplane.find_binaries`, `testbed.localnodes.NodeBinaries`;
built once per minor by hack/build-minor.sh and cached). pytest's JUnit report
gives the counts; each minor's row in the table between the markers below is
replaced by the new run's, the others are kept, so running one minor updates one
row. The exit status is pytest's worst.

Needs what `make e2e` needs (root, cgroup v1, containerd): hack/node-setup.sh.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from testbed import controlplane

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "compatibility.md"
START = "<!-- e2e-matrix: rows written by `make e2e-matrix` (testbed/e2ematrix.py) -->"
END = "<!-- e2e-matrix: end -->"
HEADER = (
    "| minor | Kubernetes | real-node e2e (`pytest -m e2e tests/e2e`) | wall | run on |\n"
    "|---|---|---|---|---|"
)
_ROW = re.compile(r"^\| (\d+\.\d+) \|")


@dataclass(frozen=True)
class Outcome:
    minor: str
    version: str  # the git version the binaries were stamped with, v1.34.4
    passed: int
    failed: int
    skipped: int
    wall_s: float
    day: str
    commit: str

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.passed > 0

    def row(self) -> str:
        counts = f"{self.passed} passed, {self.failed} failed, {self.skipped} skipped"
        verdict = "**passes**" if self.ok else "**fails**"
        return (
            f"| {self.minor} | {self.version} | {verdict}: {counts} | "
            f"{self.wall_s / 60:.0f} min | {self.day}, {self.commit} |"
        )


def counts(junit: Path) -> tuple[int, int, int]:
    """passed, failed (errors included), skipped in a pytest JUnit report."""
    root = ET.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = failed = skipped = 0
    for suite in suites:
        total += int(suite.get("tests", 0))
        failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped += int(suite.get("skipped", 0))
    return total - failed - skipped, failed, skipped


def pinned_version(minor: str) -> str:
    """The exact release hack/ pins for `minor`."""
    hack = REPO / "hack"
    mod = (
        hack / "go.mod"
        if minor == controlplane.pinned_minor()
        else hack / "minor" / f"v{minor}" / "go.mod"
    )
    for line in mod.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "k8s.io/kubernetes":
            return fields[1]
    raise SystemExit(f"e2e-matrix: {mod} pins no k8s.io/kubernetes")


def run_minor(minor: str, pytest_args: list[str]) -> Outcome:
    env = dict(os.environ)
    env.pop("NODEQOS_NODE_BIN", None)
    if minor == controlplane.pinned_minor():
        env.pop(controlplane.MINOR_ENV, None)
    else:
        env[controlplane.MINOR_ENV] = minor
        env.pop("NODEQOS_CONTROL_PLANE_BIN", None)
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True, check=False,
    ).stdout.strip() or "unknown"  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="nodeqos-e2e-matrix-") as tmp:
        junit = Path(tmp) / "junit.xml"
        command = [sys.executable, "-m", "pytest", "-m", "e2e", "tests/e2e",
                   f"--junitxml={junit}", *pytest_args]  # fmt: skip
        print(f"e2e-matrix: Kubernetes {minor}: {' '.join(command[1:])}", flush=True)
        started = time.monotonic()
        subprocess.run(command, cwd=REPO, env=env, check=False)
        wall = time.monotonic() - started
        passed, failed, skipped = counts(junit) if junit.exists() else (0, 1, 0)
    return Outcome(
        minor, pinned_version(minor), passed, failed, skipped, wall,
        dt.datetime.now(dt.UTC).date().isoformat(), commit,
    )  # fmt: skip


def write_rows(doc: str, outcomes: list[Outcome]) -> str:
    """`doc` with the table between the markers holding `outcomes`' rows (newest minor
    first) and every other minor's earlier row."""
    if START not in doc or END not in doc:
        raise SystemExit(f"e2e-matrix: {DOC} lacks the markers {START!r} ... {END!r}")
    head, rest = doc.split(START, 1)
    table, tail = rest.split(END, 1)
    rows = {m[1]: line for line in table.splitlines() if (m := _ROW.match(line))}
    rows.update({o.minor: o.row() for o in outcomes})
    ordered = sorted(rows, key=lambda m: tuple(int(x) for x in m.split(".")), reverse=True)
    body = "\n".join([HEADER, *(rows[m] for m in ordered)])
    return f"{head}{START}\n{body}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed.e2ematrix", description=__doc__)
    parser.add_argument(
        "--minors",
        default=",".join(controlplane.supported_minors()),
        help="comma-separated minors to run, default every supported one",
    )
    parser.add_argument("pytest_args", nargs="*", help="passed on to pytest (after --)")
    args = parser.parse_args(argv)
    known = controlplane.supported_minors()
    wanted = [m.strip().removeprefix("v") for m in args.minors.split(",") if m.strip()]
    unknown = [m for m in wanted if m not in known]
    if unknown:
        parser.error(f"--minors: {', '.join(unknown)} not supported; pick from {', '.join(known)}")
    outcomes = [run_minor(minor, args.pytest_args) for minor in wanted]
    DOC.write_text(write_rows(DOC.read_text(), outcomes))
    for outcome in outcomes:
        print(f"e2e-matrix: {outcome.row()}")
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
