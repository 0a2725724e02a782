"""The package layering of docs/design.md holds: read every module's imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# package -> the packages of ours it may import (docs/design.md, "The house")
ALLOWED: dict[str, frozenset[str]] = {
    "kube": frozenset(),
    "cgroups": frozenset(),
    "metriccache": frozenset(),
    "qosmanager": frozenset({"kube", "cgroups", "metriccache"}),
    "agent": frozenset({"kube", "cgroups", "metriccache", "qosmanager"}),
    "descheduler": frozenset({"kube"}),
    "extender": frozenset({"kube"}),
    "manager": frozenset({"kube"}),
    # the local-cluster test bench: tests, bench/ and hack/demo import it, no product package does
    "testbed": frozenset({"kube"}),
}


def imported_packages(source: str) -> set[str]:
    """Top-level names a module imports, relative imports excluded (they stay in the package)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def violations(package: str, root: Path = ROOT) -> list[str]:
    ours = set(ALLOWED)
    bad = []
    for path in sorted((root / package).rglob("*.py")):
        for imported in sorted(imported_packages(path.read_text()) & ours - {package}):
            if imported not in ALLOWED[package]:
                bad.append(f"{path.relative_to(root)} imports {imported}")
    return bad


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_what_design_allows(package: str) -> None:
    """No module imports a package DESIGN.md forbids it."""
    assert violations(package) == []


def test_checker_catches_a_forbidden_import(tmp_path: Path) -> None:
    """The checker itself is not blind: a descheduler module importing agent is reported."""
    (tmp_path / "descheduler").mkdir()
    (tmp_path / "descheduler" / "bad.py").write_text(
        "from agent import collectors\nimport kube.rest\n"
    )
    assert violations("descheduler", tmp_path) == ["descheduler/bad.py imports agent"]


PRODUCT = sorted(set(ALLOWED) - {"testbed"})


def test_no_product_package_imports_the_test_bench() -> None:
    """testbed is allowed to no product package: the daemons never load the harness."""
    assert all("testbed" not in ALLOWED[package] for package in PRODUCT)


def test_every_package_exists_and_is_typed() -> None:
    """Every product package exists and ships py.typed."""
    for package in PRODUCT:
        assert (ROOT / package / "__init__.py").exists(), package
        assert (ROOT / package / "py.typed").exists(), package
