"""The docs quote real commands and cite real sections.

Reads README.md and docs/*.md (`mkdocs build --strict` in `make test` checks
their links): every `--flag` quoted with `nodeqos-agent`, `nodeqos-descheduler`,
`nodeqos-scheduler-extender` or `nodeqos-manager` is in that command's `--help`, every
`make <target>` quoted is a Makefile target, every page is on the README's map,
and every code comment citing docs/design.md names a section it has.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from agent import cli as agent_cli
from descheduler import cli as descheduler_cli
from extender import cli as extender_cli
from manager import cli as manager_cli
from tests.qosmanager import example_plugin

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FLAG = re.compile(r"--[a-z][a-z0-9-]*[a-z0-9]")
# A command name as a word: not the middle of `nodeqos-agent-own-nodemetric`.
COMMAND = re.compile(
    r"(?<![\w-])(nodeqos-agent|nodeqos-descheduler|nodeqos-scheduler-extender|nodeqos-manager)"
    r"(?![\w-])"
)
# Where a quoted command line ends: a shell comment, pipe, list or redirection.
END_OF_COMMAND = re.compile(r"\s(#|\||;|&&|&|>)")
MAKE = re.compile(r"(?<![\w-])make ([a-z][\w-]*)")


def helped(command: click.Command, args: list[str]) -> set[str]:
    """The flags `command args --help` prints."""
    result = CliRunner().invoke(command, [*args, "--help"])
    assert result.exit_code == 0, result.output
    return set(FLAG.findall(result.output))


@functools.cache
def known_flags() -> dict[tuple[str, str], set[str]]:
    """(command, subcommand or "") -> its flags, read from --help in-process.

    The agent is built with the docs' example QoS plugin registered, as
    docs/plugins.md runs it, so the example's own flag counts.
    """
    agent = agent_cli.build_command(example_plugin.register)
    return {
        ("nodeqos-agent", ""): helped(agent, []),
        ("nodeqos-descheduler", ""): helped(descheduler_cli.main, []),
        ("nodeqos-descheduler", "simulate"): helped(descheduler_cli.main, ["simulate"]),
        ("nodeqos-scheduler-extender", ""): helped(extender_cli.main, []),
        ("nodeqos-manager", ""): helped(manager_cli.main, []),
        ("nodeqos-manager", "render"): helped(manager_cli.main, ["render"]),
    }


def code_of(text: str) -> Iterator[str]:
    """Each logical line of the fenced blocks (backslash continuations joined) and each code span."""
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.DOTALL | re.MULTILINE)
    for block in fenced:
        yield from block.replace("\\\n", " ").splitlines()
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
    yield from re.findall(r"`([^`\n]+)`", prose.replace("\n", " "))


SUBCOMMANDS = {("nodeqos-descheduler", "simulate"), ("nodeqos-manager", "render")}


def quoted_invocations(text: str) -> Iterator[tuple[str, str, str]]:
    """(command, subcommand, flag) for every flag written after a command name in code."""
    for line in code_of(text):
        for found in COMMAND.finditer(line):
            rest = END_OF_COMMAND.split(line[found.end() :], maxsplit=1)[0]
            subcommand = ""
            for token in rest.split():
                if (found.group(1), token) in SUBCOMMANDS:
                    subcommand = token
                for flag in FLAG.findall(token.split("=", 1)[0]):
                    yield found.group(1), subcommand, flag


# A flag table's first column on a command's own page names that command's flags.
TABLE_PAGES = {"agent.md": "nodeqos-agent", "descheduler.md": "nodeqos-descheduler"}


def tabled_flags(text: str) -> Iterator[str]:
    """Flags in the first cell of a table row, e.g. | `--cgroup-root` / `--proc-root` | ..."""
    for row in re.findall(r"^\| *(`--[^|]*)\|", text, re.MULTILINE):
        yield from FLAG.findall(row)


def quoted_flags() -> list[tuple[str, str, str, str]]:
    """(page, command, subcommand, flag) quoted anywhere in the docs."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for command, subcommand, flag in quoted_invocations(text):
            found.append((page.name, command, subcommand, flag))
        if page.name in TABLE_PAGES:
            found += [(page.name, TABLE_PAGES[page.name], "", f) for f in tabled_flags(text)]
    return found


def test_the_docs_quote_flags_of_every_command() -> None:
    """The scan is not blind: each command has flags quoted, tables included."""
    commands = {command for _page, command, _sub, _flag in quoted_flags()}
    assert commands == {
        "nodeqos-agent",
        "nodeqos-descheduler",
        "nodeqos-scheduler-extender",
        "nodeqos-manager",
    }
    assert ("agent.md", "nodeqos-agent", "", "--node-usage-source") in quoted_flags()
    assert ("descheduler.md", "nodeqos-descheduler", "simulate", "--snapshot") in quoted_flags()
    assert ("manager.md", "nodeqos-manager", "render", "--node-labels") in quoted_flags()


def test_every_quoted_flag_is_in_its_commands_help() -> None:
    """A flag the docs quote with a command is one that command's --help lists."""
    flags = known_flags()
    unknown = [
        f"{page}: {command} {subcommand} {flag}".replace("  ", " ")
        for page, command, subcommand, flag in quoted_flags()
        if flag not in flags[command, subcommand]
    ]
    assert unknown == []


def test_the_flag_check_catches_a_made_up_flag() -> None:
    """A command line with an invented flag yields it, after the command, not before."""
    text = "```sh\nFOO=1 --not-this nodeqos-agent --standalone \\\n  --no-such-flag  # --nor-this\n```\n"
    assert list(quoted_invocations(text)) == [
        ("nodeqos-agent", "", "--standalone"),
        ("nodeqos-agent", "", "--no-such-flag"),
    ]
    assert "--no-such-flag" not in known_flags()["nodeqos-agent", ""]


def makefile_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.MULTILINE))


def test_every_quoted_make_target_exists() -> None:
    """`make <target>` in the docs' code names a target of the Makefile."""
    quoted = {
        (page.name, target)
        for page in PAGES
        for line in code_of(page.read_text())
        for target in MAKE.findall(line)
    }
    assert ("README.md", "demo") in quoted
    assert ("README.md", "test") in quoted
    assert [q for q in sorted(quoted) if q[1] not in makefile_targets()] == []


def test_every_page_is_on_the_readme_map() -> None:
    """README.md links every page of docs/, and docs/index.md every other page."""
    readme = (ROOT / "README.md").read_text()
    index = (ROOT / "docs" / "index.md").read_text()
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name != "index.md":
            assert f"(docs/{page.name})" in readme, page.name
            assert f"({page.name})" in index, page.name


def design_sections() -> dict[str, int]:
    """docs/design.md's headings -> how many numbered items the section lists."""
    sections: dict[str, int] = {}
    heading = ""
    for line in (ROOT / "docs" / "design.md").read_text().splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
            sections[heading] = 0
        elif re.match(r"\d+\. ", line):
            sections[heading] += 1
    return sections


# docs/design.md, "Beyond the reference" 4  |  docs/design.md's ("Usage semantics")
CITATION = re.compile(r"docs/design\.md(?:'s)?,? *\(?(?:\"([^\"]+)\"(?: (\d+))?)?")


def citations() -> list[tuple[str, str | None, int | None]]:
    """(file, section, item) for each docs/design.md citation in our Python source."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if {".git", "build", ".venv"} & set(path.relative_to(ROOT).parts):
            continue
        # A citation may wrap over comment lines: join them.
        text = re.sub(r"\s*\n\s*(?:# ?)?", " ", path.read_text())
        for match in CITATION.finditer(text):
            item = int(match.group(2)) if match.group(2) else None
            found.append((str(path.relative_to(ROOT)), match.group(1), item))
    return found


def test_design_citations_name_real_sections() -> None:
    """Each docs/design.md citation in the code names a heading of it (and an item it has)."""
    sections = design_sections()
    wrong = [
        (path, section, item)
        for path, section, item in citations()
        if path != "tests/test_docs.py"
        and (section not in sections or (item is not None and not 1 <= item <= sections[section]))
    ]
    assert len(citations()) >= 26
    assert wrong == []


@pytest.mark.parametrize(
    ("source", "ok"),
    [
        pytest.param('x (docs/design.md, "Beyond the reference" 4)', True, id="numbered"),
        pytest.param('x (docs/design.md, "Beyond the reference" 99)', False, id="no-such-item"),
        pytest.param('x docs/design.md\'s ("Usage semantics")', True, id="possessive"),
        pytest.param('x (docs/design.md, "No such heading")', False, id="no-such-heading"),
        pytest.param("x (docs/design.md)", False, id="no-section"),
    ],
)
def test_the_citation_check_tells_good_from_bad(source: str, ok: bool) -> None:
    """The citation pattern reads each form, and a missing section or item is caught."""
    sections = design_sections()
    match = CITATION.search(source)
    assert match is not None
    section, item = match.group(1), int(match.group(2)) if match.group(2) else None
    good = section in sections and (item is None or 1 <= item <= sections[section])
    assert good is ok
