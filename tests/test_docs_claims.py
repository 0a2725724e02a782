"""The docs' countable claims hold: how many daemons the image holds, which CRDs an
install brings, which metrics the daemons export.

Each claim is read from the prose (README, docs/, the Dockerfile, the chart's
values) and held against the thing itself: the console scripts in
pyproject.toml, the CRD files in deploy/crds/ and the chart, the metric names
the product's code declares.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
PROSE = [
    ROOT / "README.md",
    ROOT / "Dockerfile",
    ROOT / "deploy" / "helm" / "nodeqos" / "values.yaml",
    *sorted((ROOT / "docs").glob("*.md")),
]
PRODUCT = ("agent", "descheduler", "extender", "manager", "kube", "qosmanager", "metriccache")
NUMBERS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
DAEMON_COUNT = re.compile(r"\ball (two|three|four|five|six)\s+(?:daemons|components)\b")
CRD_LIST = re.compile(r"CRDs \(([^)]*)\)|deploy/crds/\s+#\s*(.+)")
METRIC = re.compile(r"\bnodeqos_(?:agent|descheduler|extender|manager)_[a-z0-9_]*[a-z0-9]\b")
SUFFIXES = re.compile(r"_(total|bucket|count|sum|created|info)$")


def daemon_counts(text: str) -> list[int]:
    return [NUMBERS[m.group(1)] for m in DAEMON_COUNT.finditer(text)]


def listed_kinds(text: str) -> list[set[str]]:
    """Each CRD list in `text`, as the set of kinds it names."""
    found = (
        set(re.findall(r"\b[A-Z][A-Za-z]+\b", m.group(1) or m.group(2)))
        for m in CRD_LIST.finditer(text)
    )
    return [kinds for kinds in found if kinds]  # "CRDs (ours are ...)": a remark, not a list


def declared_metric_names() -> set[str]:
    """Every `nodeqos_*` string literal of the product's code: the metric names it declares."""
    names = set()
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                value = node.value if isinstance(node, ast.Constant) else None
                if isinstance(value, str) and value.startswith("nodeqos_"):
                    names.add(value)
    return names


def unknown_metrics(text: str, declared: set[str]) -> set[str]:
    """Names in `text` that no declared metric has (a quoted prefix, as in `grep`, is fine)."""
    return {
        name
        for name in METRIC.findall(text)
        if not any(d.startswith(SUFFIXES.sub("", name)) for d in declared)
    }


def test_every_daemon_count_matches_the_console_scripts() -> None:
    """'all four daemons' wherever the prose counts them: one per console script."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    wrong = {
        page.relative_to(ROOT).as_posix(): count
        for page in PROSE
        for count in daemon_counts(page.read_text())
        if count != len(scripts)
    }
    assert not wrong, f"{len(scripts)} daemons ({', '.join(scripts)}), the prose says {wrong}"


def test_every_crd_list_names_the_crds_an_install_brings() -> None:
    """Each 'CRDs (...)' list names exactly the kinds of deploy/crds/, the chart's too."""
    kinds = {
        yaml.safe_load(path.read_text())["spec"]["names"]["kind"]
        for path in (ROOT / "deploy" / "crds").glob("*.yaml")
    }
    chart = {p.name for p in (ROOT / "deploy" / "helm" / "nodeqos" / "crds").glob("*.yaml")}
    assert chart == {p.name for p in (ROOT / "deploy" / "crds").glob("*.yaml")}
    lists = [(page.name, found) for page in PROSE for found in listed_kinds(page.read_text())]
    assert lists, "no CRD list found in the prose: the pattern no longer matches"
    wrong = [(page, sorted(found)) for page, found in lists if found != kinds]
    assert not wrong, f"the CRDs are {sorted(kinds)}; these lists differ: {wrong}"


def test_every_metric_the_docs_name_is_declared() -> None:
    """No page names a nodeqos_* metric that no daemon exports."""
    declared = declared_metric_names()
    wrong = {
        page.relative_to(ROOT).as_posix(): sorted(unknown)
        for page in PROSE
        if (unknown := unknown_metrics(page.read_text(), declared))
    }
    assert not wrong, wrong


@pytest.mark.parametrize(
    ("check", "text", "found"),
    [
        pytest.param(daemon_counts, "one image holds all three daemons", [3], id="count"),
        pytest.param(
            listed_kinds,
            "the CRDs (NodeMetric, NodeSLO) included",
            [{"NodeMetric", "NodeSLO"}],
            id="crds",
        ),
        pytest.param(
            lambda t: unknown_metrics(t, {"nodeqos_agent_up"}),
            "`nodeqos_agent_up`, `nodeqos_agent_made_up_total`",
            {"nodeqos_agent_made_up_total"},
            id="metrics",
        ),
    ],
)
def test_the_checks_see_a_wrong_claim(check: object, text: str, found: object) -> None:
    """Each reader finds the claim in a sentence of the kind the docs write."""
    assert callable(check)
    assert check(text) == found
