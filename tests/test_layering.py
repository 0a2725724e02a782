"""The package layering of docs/design.md, "The house", holds: read every module's imports."""

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
    """No module imports a package docs/design.md, "The house", forbids it."""
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


def module_imports(path: Path, package: str) -> set[str]:
    """The modules of `package` one of its modules imports, type-only imports included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == package:
                found.update(alias.name for alias in node.names)
            elif node.module.startswith(f"{package}."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(
                alias.name.split(".")[1]
                for alias in node.names
                if alias.name.startswith(f"{package}.")
            )
    return found


def import_cycles(package: str, root: Path = ROOT) -> list[list[str]]:
    """Every cycle of imports among the top-level modules of `package` (depth-first)."""
    modules = {p.stem: p for p in (root / package).glob("*.py") if p.stem != "__init__"}
    graph = {
        name: sorted(module_imports(p, package) & modules.keys()) for name, p in modules.items()
    }
    cycles: list[list[str]] = []
    state: dict[str, str] = {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = "open"
        for imported in graph[name]:
            if state.get(imported) == "open":
                cycles.append([*trail[trail.index(imported) :], imported])
            elif imported not in state:
                visit(imported, [*trail, imported])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return cycles


def test_kube_modules_import_each_other_without_cycles() -> None:
    """The foundation's modules form no import cycle, not even a type-only one."""
    assert import_cycles("kube") == []


def test_cycle_finder_sees_a_type_only_cycle(tmp_path: Path) -> None:
    """The cycle finder is not blind: a TYPE_CHECKING import back is a cycle."""
    (tmp_path / "kube").mkdir()
    (tmp_path / "kube" / "a.py").write_text("from kube import b\n")
    (tmp_path / "kube" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kube import a\n"
    )
    assert import_cycles("kube", tmp_path) == [["a", "b", "a"]]
