"""A spinning Python process for tests against real cgroups, which says when it is ready.

Both real-cgroup tests (tests/agent/test_realcgroup.py,
tests/qosmanager/test_realcgroup.py) start a busy process, move it into a
cgroup, then measure it. Sleeping "long enough" for it to get going raced on
a slow or loaded machine (the agent test once read the pod's memory before
the 32 MiB ballast was all charged), so the process waits on stdin until it
has been moved, allocates and touches its ballast, then writes one line and
spins; `release` returns only once that line is read:

    with spinning(ballast_mib=32) as busy:
        (cgroup_dir / "cgroup.procs").write_text(str(busy.pid))
        busy.release()  # moved, ballast charged, spinning
        ...
"""

from __future__ import annotations

import select
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

READY = b"spinning\n"
READY_TIMEOUT_S = 30.0
_SCRIPT = """\
import sys
sys.stdin.readline()
ballast = bytearray(b"x" * ({ballast_mib} << 20))  # every page written, so charged
sys.stdout.buffer.write({ready!r})
sys.stdout.flush()
while True:
    pass
"""


class BusyProcess:
    """The running process; `pid` to move it, `release` to let it go."""

    def __init__(self, ballast_mib: int, prefix: Sequence[str] = ()) -> None:
        script = _SCRIPT.format(ballast_mib=ballast_mib, ready=READY)
        self._proc = subprocess.Popen(
            [*prefix, sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    @property
    def pid(self) -> int:
        return self._proc.pid

    def release(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Let the process allocate its ballast and spin; return once it says so."""
        stdin, stdout = self._proc.stdin, self._proc.stdout
        assert stdin is not None and stdout is not None
        stdin.write(b"go\n")
        stdin.flush()
        ready, _, _ = select.select([stdout], [], [], timeout)
        line = stdout.readline() if ready else b""
        if line != READY:
            raise AssertionError(
                f"the busy process did not report ready within {timeout}s "
                f"(read {line!r}, exit code {self._proc.poll()})"
            )

    def close(self) -> None:
        self._proc.kill()
        self._proc.wait()
        for pipe in (self._proc.stdin, self._proc.stdout):
            if pipe is not None:
                pipe.close()


@contextmanager
def spinning(ballast_mib: int = 0, prefix: Sequence[str] = ()) -> Iterator[BusyProcess]:
    """A busy process, waiting to be released; always killed on exit.

    `prefix` runs it through a launcher that execs it, keeping its pid (the
    cgroup v2 VM checks use `systemd-run --scope ...` to start it in a pod slice).
    """
    busy = BusyProcess(ballast_mib, prefix)
    try:
        yield busy
    finally:
        busy.close()
