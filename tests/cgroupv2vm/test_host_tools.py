"""hack/vm/host-tools.sh: what it says when the VM's host tools cannot be installed.

Run with a PATH that hides QEMU (the script adds /usr/sbin and /sbin, where
debootstrap and mkfs.ext4 live on Debian), so nothing is ever installed here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from testbed import vm


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    bash, id_ = shutil.which("bash"), shutil.which("id")
    assert bash is not None and id_ is not None
    if tmp_path != Path("/usr/bin"):
        (tmp_path / "id").symlink_to(id_)
    return subprocess.run(
        [bash, str(vm.HOST_TOOLS_SCRIPT)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={"PATH": str(tmp_path), **env},
    )


def test_only_checking_names_the_missing_package_and_the_install_command(tmp_path: Path) -> None:
    """NODEQOS_VM_NO_INSTALL=1 with no QEMU on PATH fails naming qemu-system-x86 and apt-get."""
    done = _run(tmp_path, NODEQOS_VM_NO_INSTALL="1")
    assert done.returncode != 0
    assert "qemu-system-x86" in done.stderr
    assert "apt-get install qemu-system-x86" in done.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the no-apt-get path is reached as root only")
def test_no_apt_get_is_named_as_what_stops_the_install(tmp_path: Path) -> None:
    """As root with no apt-get on PATH it fails saying so, and installs nothing."""
    done = _run(tmp_path)
    assert done.returncode != 0
    assert "no apt-get" in done.stderr, done.stderr


def test_nothing_is_missing_on_a_prepared_host() -> None:
    """With everything on PATH the script is a no-op that succeeds (when this host has all three)."""
    if any(shutil.which(t, path="/usr/bin:/usr/sbin:/sbin") is None for t in vm.HOST_TOOLS):
        pytest.skip(f"this host lacks one of {vm.HOST_TOOLS}")
    done = _run(Path("/usr/bin"))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
