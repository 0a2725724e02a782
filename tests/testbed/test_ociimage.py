"""testbed.ociimage: images assembled locally are valid OCI layouts with the right content."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from testbed import ociimage


@pytest.fixture
def fake_busybox(tmp_path: Path) -> Path:
    path = tmp_path / "busybox"
    path.write_bytes(b"\x7fELF fake busybox")
    return path


def _read(blob: bytes) -> tuple[dict[str, bytes], dict[str, tarfile.TarInfo]]:
    """(regular files' contents, every member's header) of a tar blob."""
    contents: dict[str, bytes] = {}
    headers: dict[str, tarfile.TarInfo] = {}
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        for info in tar.getmembers():
            headers[info.name] = info
            handle = tar.extractfile(info) if info.isfile() else None
            if handle is not None:
                contents[info.name] = handle.read()
    return contents, headers


def _blob(files: dict[str, bytes], digest: str) -> bytes:
    return files["blobs/sha256/" + digest.split(":", 1)[1]]


def test_archive_is_an_oci_layout_whose_digests_match(fake_busybox: Path) -> None:
    """index -> manifest -> config and layer, every blob named by its sha256, name annotated."""
    image = ociimage.busybox_image("nodeqos.local/busybox:1", busybox=fake_busybox)
    files, _ = _read(ociimage.oci_archive(image))
    for name, content in files.items():
        if name.startswith("blobs/sha256/"):
            assert hashlib.sha256(content).hexdigest() == name.rsplit("/", 1)[1]
    (entry,) = json.loads(files["index.json"])["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == "nodeqos.local/busybox:1"
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == "1"
    manifest = json.loads(_blob(files, entry["digest"]))
    config = json.loads(_blob(files, manifest["config"]["digest"]))
    layer = _blob(files, manifest["layers"][0]["digest"])
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(layer).hexdigest()]
    contents, headers = _read(layer)
    assert contents["bin/busybox"] == fake_busybox.read_bytes()
    assert headers["bin/sh"].issym() and headers["bin/sh"].linkname == "busybox"


def test_same_input_same_digest(fake_busybox: Path) -> None:
    """Archives are deterministic: rebuilding does not change the image id."""
    image = ociimage.pause_image("nodeqos.local/pause:1", busybox=fake_busybox)
    assert ociimage.oci_archive(image) == ociimage.oci_archive(image)


def test_missing_busybox_names_the_package(tmp_path: Path) -> None:
    """Without busybox the error says which Debian package to install."""
    with pytest.raises(ociimage.ImageError, match="busybox-static"):
        ociimage.busybox_image("x:1", busybox=tmp_path / "none")
