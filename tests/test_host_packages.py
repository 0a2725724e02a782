"""hack/host-packages.txt is the one list of host packages, and it is true.

Every host program that `hack/`, `testbed/`, `bench/` and the tests start is
provided by a package of that list, by Debian's essential set, by the toolchains
the README asks for, or is built by `hack/` itself. The program names are read
from the code: `subprocess` calls and `shutil.which` lookups with a literal
program in Python, and the command words of shell scripts. Code that runs
inside the cgroup v2 VM's guest is left out: the guest's packages are
hack/vm/build-image.sh's own list.

hack/host-setup.sh installs from the list; its checks run here with a PATH
that hides every tool, so nothing is ever installed by these tests.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LIST = REPO / "hack" / "host-packages.txt"
SETUP = REPO / "hack" / "host-setup.sh"

# Debian's Essential packages and those of priority required, on every Debian
# machine (coreutils, util-linux, mount, findutils, grep, sed, gzip, tar,
# debianutils, diffutils, bash, dash, hostname, login, perl-base, mawk, dpkg,
# apt, libc-bin, procps, kmod).
ESSENTIAL = frozenset(
    """
    apt-get awk basename bash cat chmod chown chroot cp cut date dd df dirname dpkg du
    env false find findmnt flock grep gzip head hostname id install kill ldd ln losetup
    ls mkdir mktemp modprobe mount mountpoint mv nproc nsenter perl pgrep pkill ps readlink
    realpath rm rmdir sed setsid sh sha256sum sleep sort stat sync tail tar tee timeout touch
    tr true truncate umount uname uniq unshare wc xargs yes zcat
    """.split()  # noqa: SIM905 (a word list reads better as text)
)
# What the README asks of a machine: Python and Go (and git, to clone).
TOOLCHAIN = frozenset({"python3", "python", "go", "git", "make", "pip"})
# Built from hack/'s pinned Go modules into the cache, or this project's own
# console scripts and scripts.
BUILT = frozenset(
    """
    kubelet kube-apiserver kube-controller-manager kube-scheduler etcd helm metrics-server
    prometheus descheduler certgen vegeta nodeqos-agent nodeqos-descheduler
    nodeqos-scheduler-extender nodeqos-manager
    """.split()  # noqa: SIM905 (a word list reads better as text)
)
# Files that run inside the VM's guest, whose packages hack/vm/build-image.sh installs.
GUEST_SIDE = frozenset({"tests/cgroupv2vm/guest_checks.py", "hack/vm/guest-agent.py"})
SCANNED = ("hack", "testbed", "bench", "tests")


def parse_list(text: str) -> dict[str, tuple[list[str], list[str]]]:
    """Package -> (what it provides, its groups), from host-packages.txt's text."""
    packages: dict[str, tuple[list[str], list[str]]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split(maxsplit=3)
        assert len(fields) == 4, f"line {number}: want package, provides, groups, purpose"
        package, provides, groups, _ = fields
        assert package not in packages, f"line {number}: {package} is listed twice"
        packages[package] = (provides.split(","), groups.split(","))
    return packages


def python_programs(source: str) -> set[str]:
    """Programs a Python file starts: subprocess calls and shutil.which with a literal name."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner = node.func.value
        if not (isinstance(owner, ast.Name) and node.args):
            continue
        first = node.args[0]
        if owner.id == "subprocess" and isinstance(first, ast.List | ast.Tuple) and first.elts:
            first = first.elts[0]
        elif not (owner.id == "shutil" and node.func.attr == "which"):
            continue
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            found.add(Path(first.value).name)
    return found


_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")
_FUNCTION = re.compile(r"^\s*([\w-]+)\s*\(\)")
_ARITHMETIC = re.compile(r"\$?\(\((?:[^()]|\([^()]*\))*\)\)")  # one level of nesting
_ASSIGNMENT = re.compile(r"^\w+(\[[^]]*\])?\+?=")
_NAME = re.compile(r"[\w.+-]+")
# Tokens after which a command word stands.
_COMMAND_NEXT = frozenset({";", ";;", "&&", "||", "|", "&", "(", ")", "{", "then", "else", "do"})
_COMMAND_NEXT |= {"if", "elif", "while", "until", "!", "time", "exec", "command", "builtin"}
# Words whose arguments are names or data, never commands.
_NO_COMMAND_AFTER = frozenset(
    {"local", "declare", "export", "readonly", "unset", "read", "mapfile", "for", "case"}
    | {"echo", "printf", "trap", "test", "[", "[[", "return", "exit", "set", "shift", "cd"}
    | {"source", ".", "eval", "wait", "kill", "type", "hash", "umask", "ulimit", "getopts"}
    | {"fi", "done", "esac", "in", "continue", "break", "true", "false", ":", "}", "]]", "pwd"}
)


def shell_programs(source: str) -> set[str]:
    """The command words of a shell script: builtins, keywords, its own functions and
    words made of variables left out; heredoc bodies skipped."""
    lines: list[str] = []
    delimiter = None
    for raw in source.replace("\\\n", " ").splitlines():
        if delimiter is not None:
            delimiter = None if raw.strip() == delimiter else delimiter
            continue
        lines.append(raw)
        if match := _HEREDOC.search(raw):
            delimiter = match.group(1)
    functions = {m.group(1) for line in lines if (m := _FUNCTION.match(line))}
    found: set[str] = set()
    for line in lines:
        lexer = shlex.shlex(_ARITHMETIC.sub(" ", line), posix=True, punctuation_chars=True)
        lexer.whitespace_split, lexer.commenters = True, ""
        try:
            tokens = list(lexer)
        except ValueError:  # an unclosed quote on a line of its own: a message, not code
            continue
        at_command = True
        for token in tokens:
            if token.startswith("#"):  # a comment (quoted text is one token, so not in one)
                break
            if token in _COMMAND_NEXT:
                at_command = True
            elif not at_command or _ASSIGNMENT.match(token):
                continue
            elif token in _NO_COMMAND_AFTER or token.endswith("()"):
                at_command = False
            else:
                at_command = False
                if (
                    _NAME.fullmatch(token)
                    and not token.startswith("-")
                    and not token.isdigit()
                    and token not in functions
                ):
                    found.add(token)
    return found


def provided_commands() -> set[str]:
    return {
        Path(item).name
        for provides, _ in parse_list(LIST.read_text()).values()
        for item in provides
    }


def programs_started_by(root: Path) -> dict[str, set[str]]:
    """Program -> the files that start it, over the scanned folders."""
    users: dict[str, set[str]] = {}
    for folder in SCANNED:
        for path in sorted((root / folder).rglob("*")):
            rel = path.relative_to(root).as_posix()
            if rel in GUEST_SIDE or "__pycache__" in rel or not path.is_file():
                continue
            if path.suffix == ".py":
                programs = python_programs(path.read_text())
            elif path.suffix == ".sh":
                programs = shell_programs(path.read_text())
            else:
                continue
            for program in programs:
                users.setdefault(program, set()).add(rel)
    return users


def test_the_list_is_well_formed_and_names_known_groups() -> None:
    """Every line has four fields, each package once, each in a known group."""
    packages = parse_list(LIST.read_text())
    assert {"busybox-static", "containerd", "qemu-system-x86", "stress-ng"} <= set(packages)
    for package, (_, groups) in packages.items():
        assert set(groups) <= {"nodes", "vm", "load", "bench"}, package


def test_every_host_program_the_code_starts_comes_from_the_list() -> None:
    """No program started by hack/, testbed/, bench/ or tests/ is missing from the list."""
    allowed = provided_commands() | ESSENTIAL | TOOLCHAIN | BUILT
    unlisted = {
        program: sorted(files)
        for program, files in programs_started_by(REPO).items()
        if program not in allowed
    }
    assert not unlisted, f"add these programs' packages to hack/host-packages.txt: {unlisted}"


def test_the_scanner_sees_a_program_in_python_and_shell() -> None:
    """A new tool in a script or a subprocess call is seen (so the check above can fail)."""
    script = textwrap.dedent(
        """\
        #!/usr/bin/env bash
        set -euo pipefail
        helper() { echo hi; }
        cat <<'EOF'
        heredocword --not-a-command
        EOF
        x=$(socat -V) && helper
        case $1 in
          --fast) FAST=1 tcpdump -i lo ;;
        esac
        if ! command -v jq >/dev/null; then "$tool" run; fi  # comment words
        """
    )
    assert shell_programs(script) == {"cat", "socat", "tcpdump"}
    source = (
        'import subprocess, shutil\nsubprocess.run(["/usr/bin/nft", "list"])\nshutil.which("jq")\n'
    )
    assert python_programs(source) == {"nft", "jq"}


def _setup(*args: str, path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    bash = shutil.which("bash")
    assert bash is not None
    return subprocess.run(
        [bash, str(SETUP), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={"PATH": str(path), **env},
    )


def test_checking_only_names_every_missing_package_and_the_install_command(tmp_path: Path) -> None:
    """With a PATH that hides the tools, NODEQOS_HOST_NO_INSTALL=1 names the apt-get command."""
    done = _setup("load", path=tmp_path, NODEQOS_HOST_NO_INSTALL="1")
    assert done.returncode == 1
    assert "apt-get install stress-ng" in done.stderr, done.stderr


def test_an_unknown_group_is_refused_naming_the_groups(tmp_path: Path) -> None:
    """A group the list does not have exits 2, listing the ones it has."""
    done = _setup("nodez", path=tmp_path)
    assert done.returncode == 2
    assert "unknown group 'nodez'" in done.stderr and "nodes vm load" in done.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="without root --warn stops before apt-get's lookup")
def test_warn_names_what_is_missing_and_carries_on_where_nothing_can_install(
    tmp_path: Path,
) -> None:
    """--warn with no apt-get on PATH: exit 0, naming the packages and what to run."""
    done = _setup("--warn", "vm", path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "qemu-system-x86" in done.stderr and "no apt-get" in done.stderr
    assert "hack/host-setup.sh runs as root" in done.stderr


def test_this_host_has_every_listed_package_after_setup() -> None:
    """make test ran hack/host-setup.sh first (hack/with-env.sh): nothing is missing now."""
    if os.geteuid() != 0:
        pytest.fail("run as root: hack/host-setup.sh installs the host packages with apt-get")
    done = subprocess.run(
        [str(SETUP)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={**os.environ, "NODEQOS_HOST_NO_INSTALL": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
