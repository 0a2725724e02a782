"""Container images for the real-node cluster, assembled locally, never pulled.

`testbed.localnodes` imports these into each node's containerd (`ctr -n k8s.io
images import`). Two images are built here from Debian's `busybox-static`
(one static binary, so the image needs no libc):

- the pod sandbox ("pause") image: a shell that waits for SIGTERM and exits 0,
  which is all the kubelet asks of a sandbox's process when it holds the pod's
  namespaces;
- a workload image whose /bin has busybox and its applets (`sh`, `sleep`,
  `dd`, ...), for pods that burn CPU or hold memory in tests.

A third, for `python -m bench interference`, holds Debian's nginx (a dynamically
linked binary): the binary, the shared objects `ldd` says it maps, a minimal
configuration and a small page.

The archive is an OCI image layout (index.json, oci-layout, blobs/sha256/...),
the format `ctr images import` reads; the image's name travels in the index
annotation `io.containerd.image.name` (containerd's own convention), so the
import needs no extra flags. Everything is deterministic: the same busybox
gives the same digests.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BUSYBOX = Path("/bin/busybox")

# The applets a workload needs; each becomes a symlink to /bin/busybox.
APPLETS = ("sh", "sleep", "cat", "dd", "head", "tr", "yes", "true", "ls", "echo", "env", "sync")

# The sandbox process: exit at once on TERM/INT (PID 1 gets no default handlers).
PAUSE_SCRIPT = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"

_MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
_MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
_MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


class ImageError(RuntimeError):
    """An image could not be assembled; the message names the missing piece."""


@dataclass(frozen=True, slots=True)
class Image:
    """What to put in one single-layer image."""

    name: str  # e.g. "nodeqos.local/busybox:1"
    files: Mapping[str, bytes]  # path in the image -> content (mode 0755)
    symlinks: Mapping[str, str] = field(default_factory=dict)  # path -> target
    entrypoint: Sequence[str] = ()
    cmd: Sequence[str] = ()


def busybox_image(name: str, *, busybox: Path = BUSYBOX) -> Image:
    """A workload image: /bin/busybox and its common applets."""
    return Image(
        name=name,
        files={"bin/busybox": _read_busybox(busybox)},
        symlinks={f"bin/{applet}": "busybox" for applet in APPLETS},
        cmd=("/bin/sh",),
    )


def pause_image(name: str, *, busybox: Path = BUSYBOX) -> Image:
    """A sandbox image: busybox's shell waiting for SIGTERM."""
    return Image(
        name=name,
        files={"bin/busybox": _read_busybox(busybox)},
        symlinks={"bin/sh": "busybox", "bin/sleep": "busybox"},
        entrypoint=("/bin/sh", "-c", PAUSE_SCRIPT),
    )


def _read_busybox(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as err:
        raise ImageError(
            f"{path} not found: run hack/host-setup.sh as root, which installs Debian's "
            "busybox-static (apt-get install busybox-static)"
        ) from err


def _layer(image: Image) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = sorted({str(Path(p).parent) for p in [*image.files, *image.symlinks]} - {"."})
        for directory in dirs:
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for path, content in sorted(image.files.items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(content), 0o755
            tar.addfile(info, io.BytesIO(content))
        for path, target in sorted(image.symlinks.items()):
            info = tarfile.TarInfo(path)
            info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
            tar.addfile(info)
    return out.getvalue()


def _descriptor(media_type: str, blob: bytes) -> dict[str, Any]:
    return {
        "mediaType": media_type,
        "digest": "sha256:" + hashlib.sha256(blob).hexdigest(),
        "size": len(blob),
    }


def _json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def oci_archive(image: Image) -> bytes:
    """The image as an OCI image-layout tar, ready for `ctr images import`."""
    layer = _layer(image)
    config = _json(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {
                "Entrypoint": list(image.entrypoint) or None,
                "Cmd": list(image.cmd) or None,
                "Env": ["PATH=/bin"],
            },
            "rootfs": {
                "type": "layers",
                "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()],
            },
        }
    )
    manifest = _json(
        {
            "schemaVersion": 2,
            "mediaType": _MEDIA_MANIFEST,
            "config": _descriptor(_MEDIA_CONFIG, config),
            "layers": [_descriptor(_MEDIA_LAYER, layer)],
        }
    )
    tag = image.name.rsplit(":", 1)[-1] if ":" in image.name.rsplit("/", 1)[-1] else "latest"
    index = _json(
        {
            "schemaVersion": 2,
            "manifests": [
                {
                    **_descriptor(_MEDIA_MANIFEST, manifest),
                    "annotations": {
                        "io.containerd.image.name": image.name,
                        "org.opencontainers.image.ref.name": tag,
                    },
                }
            ],
        }
    )
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        entries = {"oci-layout": _json({"imageLayoutVersion": "1.0.0"}), "index.json": index}
        for blob in (layer, config, manifest):
            entries["blobs/sha256/" + hashlib.sha256(blob).hexdigest()] = blob
        for path, content in entries.items():
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(content), 0o644
            tar.addfile(info, io.BytesIO(content))
    return out.getvalue()


def write_archive(image: Image, path: Path) -> Path:
    path.write_bytes(oci_archive(image))
    return path


# -- a dynamically linked server: nginx from Debian's package ------------------------

NGINX = Path("/usr/sbin/nginx")
NGINX_CONF = """\
# The interference bench's online server: one worker (the node has one CPU),
# a page compressed per request (gzip, as sites serve HTML), no access log (its
# writes would be the bench's noise).
user root root;
worker_processes 1;
daemon off;
pid /tmp/nginx.pid;
error_log stderr warn;
events { worker_connections 4096; }
http {
    access_log off;
    default_type text/html;
    keepalive_requests 1000000;
    gzip on;
    gzip_comp_level 6;
    gzip_types text/html;
    client_body_temp_path /tmp/body;
    proxy_temp_path /tmp/proxy;
    fastcgi_temp_path /tmp/fastcgi;
    uwsgi_temp_path /tmp/uwsgi;
    scgi_temp_path /tmp/scgi;
    server {
        listen 80;
        root /srv/www;
    }
}
"""
# A catalogue page of about 16 KiB that nginx gzips for every request (level 6,
# no cache): each request costs the server real work (~0.1-0.2 ms of CPU), so
# the generator drives a quarter of the node's CPU at a rate it can sustain on
# its own CPU (a 615-byte page needed over 5,000 requests/s for that).
NGINX_PAGE = (
    "<!DOCTYPE html><html><head><title>nodeqos online server</title></head><body>\n"
    "<h1>Catalogue</h1><table>\n"
    + "".join(
        f"<tr><td>item {i:04d}</td><td>{(i * 7919) % 10007} units</td>"
        f"<td>{(i * 104729) % 99991 / 100:.2f} EUR</td></tr>\n"
        for i in range(256)
    )
    + "</table></body></html>\n"
)


def parse_ldd(text: str) -> list[str]:
    """The absolute paths of the shared objects in `ldd` output, the loader included.

    Lines look like ``libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)`` or
    ``/lib64/ld-linux-x86-64.so.2 (0x...)``; the vDSO has no file and is skipped.
    """
    found = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("linux-vdso") or line.startswith("linux-gate"):
            continue
        name, arrow, target = line.partition("=>")
        path = (target if arrow else name).strip().split(" (", 1)[0].strip()
        if path == "not found" or not path.startswith("/"):
            raise ImageError(f"shared object {name.strip()} not found (ldd: {line!r})")
        found.append(path)
    return found


def shared_objects(binary: Path) -> list[str]:
    """What the dynamic loader maps for `binary`: `ldd`'s answer, parsed."""
    try:
        done = subprocess.run(
            ["ldd", str(binary)], capture_output=True, text=True, check=False, timeout=30
        )
    except FileNotFoundError as err:
        raise ImageError("no ldd on PATH (Debian's libc-bin provides it)") from err
    if done.returncode != 0:
        raise ImageError(f"ldd {binary}: {done.stderr.strip() or done.stdout.strip()}")
    return parse_ldd(done.stdout)


def nginx_image(name: str, *, nginx: Path = NGINX) -> Image:
    """nginx from the host's Debian package with its shared objects (ldd's closure),
    a minimal configuration, a small page, and the passwd/group entries it looks up."""
    if not nginx.is_file():
        raise ImageError(
            f"{nginx} not found: run hack/host-setup.sh bench as root, which installs "
            "Debian's nginx (apt-get install nginx)"
        )
    files = {nginx.as_posix().lstrip("/"): nginx.read_bytes()}
    for path in shared_objects(nginx):
        files[path.lstrip("/")] = Path(path).resolve().read_bytes()
    files.update(
        {
            "etc/nginx/nginx.conf": NGINX_CONF.encode(),
            "srv/www/index.html": NGINX_PAGE.encode(),
            "etc/passwd": b"root:x:0:0:root:/root:/bin/false\n",
            "etc/group": b"root:x:0:\n",
            "tmp/.keep": b"",
        }
    )
    return Image(
        name=name,
        files=files,
        entrypoint=(
            "/" + nginx.as_posix().lstrip("/"),
            "-e",
            "stderr",
            "-c",
            "/etc/nginx/nginx.conf",
        ),
    )
