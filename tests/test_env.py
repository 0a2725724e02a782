"""hack/with-env.sh gives every checkout its own environment over shared dependencies.

Two checkouts once shared one virtual environment whose editable install
pointed at whichever ran last, and one saw `ModuleNotFoundError: No module
named 'descheduler'` mid-run. These tests copy this checkout twice into
tmp_path and run each copy's `hack/with-env.sh` with a temporary
NODEQOS_CACHE seeded with the dependencies this run already uses (their
wheels and their venv, linked, never written) and pip told not to use an
index, so nothing is downloaded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "qosmanager", "metriccache", "descheduler", "extender", "kube", "cgroups")
# where the installed code comes from, without the checkout on PYTHONPATH
# (with-env.sh puts it there) and away from the checkout's directory
WHERE = (
    "cd / && env -u PYTHONPATH python -c "
    "'import agent, descheduler, sys; print(agent.__file__); print(sys.prefix)'"
)


def checkout(tmp_path: Path, name: str) -> Path:
    """A copy of what with-env.sh and an editable install of nodeqos need."""
    root = tmp_path / name
    (root / "hack").mkdir(parents=True)
    for rel in (
        "pyproject.toml",
        "README.md",
        "hack/with-env.sh",
        "hack/host-setup.sh",
        "hack/host-packages.txt",
    ):
        shutil.copy2(REPO / rel, root / rel)
    for package in PACKAGES:
        shutil.copytree(
            REPO / package, root / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    return root


def seeded_cache(tmp_path: Path) -> Path:
    """A NODEQOS_CACHE holding links to this run's dependency wheels and venv."""
    stamp = Path(sys.prefix) / ".nodeqos-deps"
    assert stamp.is_file(), f"{sys.prefix} is not a hack/with-env.sh venv; run the tests through it"
    deps = Path(stamp.read_text().strip())
    wheels = deps.parent.parent / "wheels" / deps.name
    assert (wheels / ".nodeqos-complete").is_file(), f"no complete wheel cache at {wheels}"
    cache = tmp_path / "cache"
    for kind, target in (("deps", deps), ("wheels", wheels)):
        (cache / kind).mkdir(parents=True)
        (cache / kind / target.name).symlink_to(target)
    return cache


def with_env(root: Path, cache: Path, command: str) -> tuple[list[str], str, float]:
    """Run `command` through root's hack/with-env.sh: stdout lines, stderr, seconds."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"NODEQOS_CACHE": str(cache), "NODEQOS_SKIP_CONTROL_PLANE": "1", "PIP_NO_INDEX": "1"}
    started = time.monotonic()
    done = subprocess.run(
        [str(root / "hack" / "with-env.sh"), "sh", "-c", command],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    assert "downloading" not in done.stderr, done.stderr  # the seeded wheels were enough
    return done.stdout.split(), done.stderr, elapsed


def test_two_checkouts_get_their_own_environment_and_code(tmp_path: Path) -> None:
    """Each checkout imports its own code from its own venv, whichever ran last."""
    cache = seeded_cache(tmp_path)
    one, two = checkout(tmp_path, "one"), checkout(tmp_path, "two")
    (agent_one, prefix_one), _err, created = with_env(one, cache, WHERE)
    (agent_two, prefix_two), _err, _ = with_env(two, cache, WHERE)
    assert agent_one == str(one / "agent" / "__init__.py")
    assert agent_two == str(two / "agent" / "__init__.py")
    assert prefix_one != prefix_two
    assert {Path(prefix_one).parent, Path(prefix_two).parent} == {cache / "venv"}
    # the first checkout again, after the second set up its own: still its own code
    (agent_again, prefix_again), _err, reused = with_env(one, cache, WHERE)
    assert (agent_again, prefix_again) == (agent_one, prefix_one)
    # and the dependencies' console scripts run on the checkout's python
    (pytest_path,), _err, _ = with_env(two, cache, "command -v pytest")
    assert pytest_path == f"{prefix_two}/bin/pytest"
    assert Path(pytest_path).read_text().splitlines()[0] == f"#!{prefix_two}/bin/python"
    print(f"new checkout's venv over cached dependencies: {created:.1f} s; reused: {reused:.1f} s")


def test_a_removed_checkouts_venv_is_pruned_when_another_is_built(tmp_path: Path) -> None:
    """Building a venv removes the venvs of checkouts that are gone, and only those."""
    cache = seeded_cache(tmp_path)
    kept, gone = checkout(tmp_path, "kept"), checkout(tmp_path, "gone")
    (_, prefix_kept), _err, _ = with_env(kept, cache, WHERE)
    (_, prefix_gone), _err, _ = with_env(gone, cache, WHERE)
    shutil.rmtree(gone)
    _out, err, _ = with_env(checkout(tmp_path, "new"), cache, WHERE)
    assert f"removing {prefix_gone}" in err
    assert not Path(prefix_gone).exists()
    assert Path(prefix_kept, ".nodeqos-complete").is_file()
    assert any((cache / "deps").iterdir())  # the shared dependencies stay
