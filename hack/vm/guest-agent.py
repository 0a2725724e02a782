#!/usr/bin/python3
"""The command agent inside the cgroup v2 test VM (hack/vm/build-image.sh installs it).

It serves one virtio-serial port, /dev/virtio-ports/org.nodeqos.agent, which
testbed/vm.py connects to through QEMU's unix-socket chardev. The protocol is
one JSON object per line each way:

    request  {"id": 7, "argv": ["cat", "/proc/cgroups"], "timeout": 30, "stdin": "<base64>"}
    reply    {"id": 7, "rc": 0, "stdout": "<base64>", "stderr": "<base64>"}

Requests run one at a time (the host side serialises them too); rc -1 means
the command could not start or timed out, with the reason in stderr. Nothing
but the standard library: the image has python3 and no pip packages.
"""

import base64
import json
import subprocess
import time

PORT = "/dev/virtio-ports/org.nodeqos.agent"


def run(request):
    try:
        done = subprocess.run(
            request["argv"],
            input=base64.b64decode(request.get("stdin", "")),
            capture_output=True,
            timeout=request.get("timeout", 60),
            env=request.get("env"),
            check=False,
        )
        rc, out, err = done.returncode, done.stdout, done.stderr
    except (OSError, subprocess.TimeoutExpired, KeyError, TypeError) as error:
        rc, out, err = -1, b"", repr(error).encode()
    return {
        "id": request.get("id"),
        "rc": rc,
        "stdout": base64.b64encode(out).decode(),
        "stderr": base64.b64encode(err).decode(),
    }


def serve():
    with open(PORT, "r+b", buffering=0) as port:
        parts = []  # the current line's chunks: a large request (a tar on stdin) arrives in many
        while True:
            chunk = port.read(1 << 20)
            if not chunk:
                # No host connected: a read returns at once; poll gently.
                time.sleep(0.05)
                continue
            while b"\n" in chunk:
                head, chunk = chunk.split(b"\n", 1)
                line = b"".join([*parts, head])
                parts = []
                try:
                    request = json.loads(line)
                except ValueError:
                    continue
                data = memoryview(json.dumps(run(request)).encode() + b"\n")
                while data:
                    data = data[port.write(data) :]
            if chunk:
                parts.append(chunk)


if __name__ == "__main__":
    serve()
