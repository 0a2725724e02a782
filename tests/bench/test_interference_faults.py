"""`python -m bench interference`: a part that fails to start is named, the exit is
non-zero, and what had started is stopped (no process, directory or pod left)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from bench import _interference_arms as arms
from bench import _interference_cluster as onenode
from bench import interference
from kube import rest


class FakeNode:
    """Stands for the real node: a real process and a directory (its "cgroup"), both
    gone once the bench leaves the context."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.process: subprocess.Popen[bytes] | None = None
        self.entered = self.exited = False

    @contextlib.contextmanager
    def cluster(self, workdir: Path, images: list[Path]) -> Iterator[arms.Cluster]:
        assert all(image.is_file() for image in images)
        self.entered = True
        self.process = subprocess.Popen(["sleep", "600"])
        (self.root / "nodeqos-n1").mkdir()
        try:
            kube = rest.Rest(kubernetes.client.ApiClient(), qps=0)  # never called
            yield arms.Cluster(kube, None, workdir)
        finally:
            self.process.kill()
            self.process.wait(timeout=10)
            (self.root / "nodeqos-n1").rmdir()
            self.exited = True


def _archive(directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(b"not an image, never imported here")
    return path


def _parts(tmp_path: Path, node: FakeNode, **overrides: object) -> interference.Parts:
    defaults: dict[str, object] = {
        "generator": lambda: tmp_path / "vegeta",
        "nginx_image": lambda d: _archive(d, "nginx.tar"),
        "nodeqos_image": lambda: _archive(tmp_path / "nq", "nodeqos.tar"),
        "cluster": node.cluster,
    }
    defaults.update(overrides)
    return interference.Parts(**defaults)  # type: ignore[arg-type]


def test_a_server_that_fails_to_start_is_named_and_the_node_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server's start raising: exit 1 naming the server; the node's process and
    directory gone."""
    node = FakeNode(tmp_path)

    def server(_: arms.Cluster) -> tuple[str, str]:
        raise RuntimeError("nginx: [emerg] bind() to 0.0.0.0:80 failed")

    assert interference.main(["--rounds", "1"], _parts(tmp_path, node, server=server)) == 1
    err = capsys.readouterr().err
    assert "interference: the server failed to start: RuntimeError: nginx: [emerg]" in err
    assert node.entered and node.exited
    assert node.process is not None and node.process.poll() is not None
    assert not (tmp_path / "nodeqos-n1").exists()


def test_a_generator_that_fails_to_start_is_named(
    tmp_path: Path, page: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """vegeta exiting non-zero on its first attack: exit 1 naming the generator, the node
    stopped."""
    broken = tmp_path / "vegeta"
    broken.write_text("#!/bin/sh\necho 'vegeta: cannot start' >&2\nexit 3\n")
    broken.chmod(0o755)
    node = FakeNode(tmp_path)
    parts = _parts(tmp_path, node, generator=lambda: broken, server=lambda _: (page, "uid"))
    assert interference.main(["--rounds", "1"], parts) == 1
    err = capsys.readouterr().err
    assert "the generator failed to start" in err and "vegeta: cannot start" in err
    assert node.exited and node.process is not None and node.process.poll() is not None


def test_an_image_that_fails_to_build_is_named_before_any_node_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The nginx image missing its binary: exit 1 naming the image; no node started."""
    node = FakeNode(tmp_path)

    def nginx_image(directory: Path) -> Path:
        from testbed import ociimage

        return ociimage.write_archive(
            ociimage.nginx_image("x", nginx=tmp_path / "no-nginx"), directory / "n.tar"
        )

    assert (
        interference.main(["--rounds", "1"], _parts(tmp_path, node, nginx_image=nginx_image)) == 1
    )
    err = capsys.readouterr().err
    assert "the nginx image failed to start" in err and "apt-get install nginx" in err
    assert not node.entered


def test_the_bench_leaves_the_callers_cpu_affinity_as_it_was(tmp_path: Path) -> None:
    """The bench pins itself to the host's CPUs while it runs, and only then."""
    import os

    before = os.sched_getaffinity(0)
    with onenode.on_host_cpus():
        assert os.sched_getaffinity(0) == onenode.HOST_CPUS
    assert os.sched_getaffinity(0) == before
