"""The image and the wheel carry the product and nothing else: no test bench, no tests.

The image copies source folders into its build stage and installs the wheel
built from them, so both lists are checked: the Dockerfile's COPY sources and
the top-level packages of the wheel that ``pip wheel`` really builds.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests import test_layering

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = set(test_layering.PRODUCT)


def dockerfile_sources(text: str) -> set[str]:
    """The repository paths the Dockerfile's COPY lines take from the build context."""
    sources: set[str] = set()
    for line in text.splitlines():
        words = line.split()
        if not words or words[0] != "COPY" or any(w.startswith("--from") for w in words):
            continue
        sources.update(words[1:-1])
    return sources


def test_dockerfile_copies_only_product_packages() -> None:
    """Every folder the Dockerfile copies is a product package; testbed and tests are not."""
    copied = dockerfile_sources((ROOT / "Dockerfile").read_text())
    folders = {s for s in copied if (ROOT / s).is_dir()}
    assert folders == PRODUCT
    assert "testbed" not in copied


@pytest.mark.slow
def test_wheel_holds_only_product_packages(tmp_path: Path) -> None:
    """The wheel pyproject.toml builds holds the product packages and no others."""
    # Built from a copy: setuptools writes build/ and *.egg-info beside the sources.
    source = tmp_path / "src"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", ".*_cache"),
    )
    wheels = tmp_path / "wheels"
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps"]
    subprocess.run(
        [*pip_wheel, "--no-build-isolation", "--wheel-dir", str(wheels), str(source)], check=True
    )
    (wheel,) = wheels.glob("nodeqos-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        top = {name.split("/")[0] for name in archive.namelist() if "/" in name}
    packages = {name for name in top if not name.endswith(".dist-info")}
    assert packages == PRODUCT
