"""A cgroup v2 + systemd node in a QEMU virtual machine, for tests on a real kernel.

This machine's own kernel mounts cgroup v1 with no systemd as PID 1; the VM
boots Debian's cloud kernel with systemd and the unified hierarchy only. The
image (root filesystem, kernel, initramfs) comes from ``hack/vm/build-image.sh``,
cached outside the repository; `find_image` returns it, building it only when
asked to; `install_host_tools` installs what the host lacks to build and boot
it (``hack/vm/host-tools.sh``: QEMU, debootstrap, e2fsprogs, with apt-get).

`VirtualMachine` boots it:

- accelerator: KVM first when /dev/kvm is there, TCG (software emulation) when
  KVM cannot run the guest; nested KVM often exists as a device and still stops
  the guest at once with ``KVM internal error. Suberror: 1`` (or QEMU aborts
  setting MSR 0x10a), so a KVM boot must print to the console within 20 s or
  it is abandoned for TCG.
  `accel` says which one runs;
- the disk is opened with ``snapshot=on``: the cached image never changes;
- serial console to ``console.log`` in the work directory;
- commands run through ``hack/vm/guest-agent.py``, a small agent on a
  virtio-serial port (QEMU unix-socket chardev): no ssh, no network needed;
- files reach the guest as read-only raw disks (``disks``: a tar file is
  /dev/vdb, read with ``tar -xf /dev/vdb``): Debian's cloud kernel has no 9p
  and no virtiofs, and a disk is far faster than the serial port under TCG.
  Host directories can still be shared over 9p (``shares``, ``mount_share``)
  with a kernel that has it;
- user networking with ``restrict=on``: the guest reaches nothing, not the
  host, not the internet; `guestfwd` entries open single host loopback ports
  (a small relay per connection, so the kubelet can reach the API server);
- `shutdown` powers off through systemd and waits; a guest that does not stop
  is killed.

It is part of the test bench (package ``testbed``) and imports nothing of ours.
"""

from __future__ import annotations

import base64
import contextlib
import enum
import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

log = logging.getLogger(__name__)

BUILD_SCRIPT = Path(__file__).resolve().parent.parent / "hack" / "vm" / "build-image.sh"
HOST_TOOLS_SCRIPT = BUILD_SCRIPT.with_name("host-tools.sh")
# What hack/vm/host-tools.sh installs when missing (qemu-system-x86, debootstrap, e2fsprogs).
HOST_TOOLS = ("qemu-system-x86_64", "debootstrap", "mkfs.ext4")
QEMU = "qemu-system-x86_64"
AGENT_PORT = "org.nodeqos.agent"
# A KVM guest that works reaches systemd's banner in a few seconds (TCG: 15-40 s).
_KVM_PROBE_SECONDS = 20.0


# Copies one guest connection (QEMU gives it as stdin/stdout) to 127.0.0.1:<argv[1]>.
_RELAY = """\
import os, socket, sys, threading
upstream = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
def pump():
    while data := upstream.recv(65536):
        os.write(1, data)
    os._exit(0)
threading.Thread(target=pump, daemon=True).start()
while data := os.read(0, 65536):
    upstream.sendall(data)
upstream.shutdown(socket.SHUT_WR)
threading.Event().wait(30)
"""


class VMError(RuntimeError):
    """The VM could not be built, booted or driven; the message says what to do."""


class Accel(enum.Enum):
    KVM = "kvm"
    TCG = "tcg"


@dataclass(frozen=True, slots=True)
class Image:
    """A built VM image directory (see hack/vm/build-image.sh)."""

    directory: Path

    @property
    def rootfs(self) -> Path:
        return self.directory / "rootfs.img"

    @property
    def kernel(self) -> Path:
        return self.directory / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.directory / "initrd.img"

    @property
    def cmdline(self) -> str:
        return (self.directory / "cmdline").read_text().strip()

    @property
    def build_seconds(self) -> int:
        return int((self.directory / "build-seconds").read_text())


def find_image(*, build: bool) -> Image:
    """The cached image; `build` builds it when missing (minutes), else VMError says how."""
    env = dict(os.environ)
    if not build:
        env["NODEQOS_VM_NO_BUILD"] = "1"
    done = subprocess.run([str(BUILD_SCRIPT)], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise VMError(done.stderr.strip() or f"{BUILD_SCRIPT} exited {done.returncode}")
    return Image(Path(done.stdout.strip().splitlines()[-1]))


def install_host_tools() -> None:
    """QEMU, debootstrap and mkfs.ext4 on this host, installed with apt-get when one is
    missing (hack/vm/host-tools.sh); VMError names what is missing and what stopped it."""
    done = subprocess.run(
        [str(HOST_TOOLS_SCRIPT)], capture_output=True, text=True, check=False, timeout=1800
    )
    if done.returncode != 0:
        raise VMError(done.stderr.strip() or f"{HOST_TOOLS_SCRIPT} exited {done.returncode}")


@dataclass(frozen=True, slots=True)
class Completed:
    """A command's result in the guest."""

    argv: tuple[str, ...]
    rc: int
    stdout: bytes
    stderr: bytes

    @property
    def text(self) -> str:
        return self.stdout.decode(errors="replace")


@dataclass(slots=True)
class BootTimes:
    """Seconds from starting QEMU (of the accelerator that booted) to each milestone."""

    systemd: float | None = None  # "Welcome to Debian" on the console: PID 1 runs
    agent: float | None = None  # the guest agent answers: multi-user services are up
    abandoned_kvm: float | None = None  # time lost on a KVM attempt that failed
    notes: list[str] = field(default_factory=list)


class VirtualMachine:
    """One booted VM; use as a context manager (shutdown on exit)."""

    def __init__(
        self,
        image: Image,
        workdir: Path,
        *,
        memory_mib: int = 2048,
        cpus: int = 2,
        shares: Mapping[str, Path] | None = None,
        disks: Sequence[Path] = (),
        guestfwd: Sequence[tuple[str, int, int]] = (),
        accels: Sequence[Accel] | None = None,
    ) -> None:
        self.image = image
        self.workdir = workdir
        self.memory_mib = memory_mib
        self.cpus = cpus
        self.shares = dict(shares or {})
        # read-only raw disks, /dev/vdb onwards in order (a tar file is read with tar -f)
        self.disks = list(disks)
        # (guest ip, guest port, host loopback port)
        self.guestfwd = list(guestfwd)
        if accels is None:
            kvm = Path("/dev/kvm")
            accels = [Accel.KVM, Accel.TCG] if os.access(kvm, os.R_OK | os.W_OK) else [Accel.TCG]
        self.accels = list(accels)
        self.accel: Accel | None = None
        self.times = BootTimes()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._pending = b""
        self._next_id = 0

    @property
    def console_log(self) -> Path:
        return self.workdir / "console.log"

    @property
    def _agent_socket(self) -> Path:
        return self.workdir / "agent.sock"

    def _argv(self, accel: Accel) -> list[str]:
        netdev = "user,id=net0,restrict=on"
        if self.guestfwd:
            relay = self.workdir / "relay.py"
            relay.write_text(_RELAY)
        for guest_ip, guest_port, host_port in self.guestfwd:
            # `cmd:` spawns the relay for each guest connection; a `tcp:` target would be
            # one chardev connection made at QEMU start, which the API server closes
            # after its TLS handshake timeout, and never reopened.
            netdev += (
                f",guestfwd=tcp:{guest_ip}:{guest_port}-cmd:{sys.executable} {relay} {host_port}"
            )
        argv = [
            QEMU,
            "-nodefaults",
            "-no-user-config",
            "-machine",
            "q35",
            "-accel",
            accel.value,
            "-cpu",
            "host" if accel is Accel.KVM else "max",
            "-smp",
            str(self.cpus),
            "-m",
            str(self.memory_mib),
            "-display",
            "none",
            "-no-reboot",
            "-kernel",
            str(self.image.kernel),
            "-initrd",
            str(self.image.initrd),
            "-append",
            self.image.cmdline,
            "-drive",
            f"file={self.image.rootfs},if=virtio,format=raw,snapshot=on,cache=unsafe",
            "-serial",
            f"file:{self.console_log}",
            "-monitor",
            "none",
            "-device",
            "virtio-serial-pci",
            "-chardev",
            f"socket,id=agent,path={self._agent_socket},server=on,wait=off",
            "-device",
            f"virtserialport,chardev=agent,name={AGENT_PORT}",
            "-netdev",
            netdev,
            "-device",
            "virtio-net-pci,netdev=net0",
            "-device",
            "virtio-rng-pci",
        ]
        for disk in self.disks:
            argv += ["-drive", f"file={disk},if=virtio,format=raw,readonly=on"]
        for tag, path in self.shares.items():
            argv += [
                "-virtfs",
                f"local,path={path},mount_tag={tag},security_model=none,readonly=on",
            ]
        return argv

    def start(self, timeout: float = 300.0) -> None:
        """Boot, trying the accelerators in order; returns once the guest agent answers."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        for accel in self.accels:
            started = time.monotonic()
            self._spawn(accel)
            if accel is Accel.KVM and not self._kernel_banner_within(_KVM_PROBE_SECONDS):
                self.times.abandoned_kvm = time.monotonic() - started
                self.times.notes.append(f"KVM did not boot: {self._failure_text()}")
                log.info("vm: KVM did not boot the guest, falling back: %s", self.times.notes[-1])
                self._kill()
                continue
            self.accel = accel
            self._wait_agent(started, timeout)
            return
        raise VMError("no accelerator booted the guest: " + "; ".join(self.times.notes))

    def _spawn(self, accel: Accel) -> None:
        self.console_log.unlink(missing_ok=True)
        self._agent_socket.unlink(missing_ok=True)
        stderr = (self.workdir / f"qemu-{accel.value}.stderr").open("wb")
        with stderr:
            self._proc = subprocess.Popen(
                self._argv(accel),
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
                start_new_session=True,
            )

    def _console(self) -> str:
        try:
            return self.console_log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _failure_text(self) -> str:
        text = ""
        for name in ("qemu-kvm.stderr", "qemu-tcg.stderr"):
            with contextlib.suppress(FileNotFoundError):
                text += (self.workdir / name).read_text(errors="replace")
        lines = [line for line in text.splitlines() if line.strip()]
        return " | ".join(lines[:3]) or "no kernel banner on the console"

    def _kernel_banner_within(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        assert self._proc is not None
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return False
            # The image boots with `quiet`: the first line may be systemd's banner. A
            # KVM guest that stops at once (the nested-KVM failure) prints nothing.
            if self._console().strip():
                return True
            time.sleep(0.1)
        return False

    def _wait_agent(self, started: float, timeout: float) -> None:
        deadline = started + timeout
        assert self._proc is not None
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise VMError(
                    f"QEMU exited {self._proc.returncode} during boot: {self._failure_text()}; "
                    f"console: {self.console_log}"
                )
            if self.times.systemd is None and "Welcome to" in self._console():
                self.times.systemd = time.monotonic() - started
            if self._ping():
                self.times.agent = time.monotonic() - started
                if self.times.systemd is None and "Welcome to" in self._console():
                    self.times.systemd = self.times.agent
                return
        raise VMError(
            f"the guest agent did not answer within {timeout:.0f} s; console: {self.console_log}"
        )

    def _ping(self) -> bool:
        """One `true` through the agent, waiting up to 1 s for the reply."""
        try:
            if self._sock is None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.connect(str(self._agent_socket))
                except OSError:
                    sock.close()
                    raise
                self._sock = sock
            return self._call(["true"], timeout=1.0, stdin=b"").rc == 0
        except (OSError, TimeoutError, VMError):
            time.sleep(0.5)
            return False

    def _call(self, argv: Sequence[str], *, timeout: float, stdin: bytes) -> Completed:
        if self._sock is None:
            raise VMError("the VM is not running")
        self._next_id += 1
        ident = self._next_id
        request = {
            "id": ident,
            "argv": list(argv),
            "timeout": timeout,
            "stdin": base64.b64encode(stdin).decode(),
        }
        self._sock.sendall(json.dumps(request).encode() + b"\n")
        deadline = time.monotonic() + timeout + 5.0
        while True:
            while b"\n" in self._pending:
                line, self._pending = self._pending.split(b"\n", 1)
                reply = json.loads(line)
                if reply.get("id") != ident:
                    continue  # the late answer of an earlier ping
                return Completed(
                    argv=tuple(argv),
                    rc=int(reply["rc"]),
                    stdout=base64.b64decode(reply["stdout"]),
                    stderr=base64.b64decode(reply["stderr"]),
                )
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no reply from the guest agent to {list(argv)}")
            self._sock.settimeout(left)
            chunk = self._sock.recv(65536)
            if not chunk:
                raise VMError("the guest agent's socket closed (QEMU exited?)")
            self._pending += chunk

    def run(
        self, argv: Sequence[str], *, timeout: float = 120.0, stdin: bytes = b"", check: bool = True
    ) -> Completed:
        """Run `argv` in the guest as root; `check` raises VMError on a non-zero status."""
        done = self._call(argv, timeout=timeout, stdin=stdin)
        if check and done.rc != 0:
            raise VMError(
                f"{' '.join(argv)} exited {done.rc} in the guest: "
                f"{done.stderr.decode(errors='replace').strip()}"
            )
        return done

    def sh(self, script: str, *, timeout: float = 120.0, check: bool = True) -> Completed:
        """Run a shell script in the guest."""
        return self.run(["/bin/sh", "-c", script], timeout=timeout, check=check)

    def mount_share(self, tag: str, target: str) -> None:
        """Mount the host directory shared as `tag` read-only at `target` in the guest."""
        self.sh(
            f"mkdir -p {target} && mountpoint -q {target} || "
            f"mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 {tag} {target}"
        )

    def shutdown(self, timeout: float = 60.0) -> None:
        """Power off through systemd; kill QEMU if the guest does not stop in time."""
        if self._proc is None:
            return
        if self._proc.poll() is None and self._sock is not None:
            with contextlib.suppress(OSError):
                request = {"id": -1, "argv": ["systemctl", "--no-block", "poweroff"]}
                self._sock.sendall(json.dumps(request).encode() + b"\n")
            try:
                self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                log.warning("vm: the guest did not power off within %.0f s; killing QEMU", timeout)
        self._kill()

    def _kill(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._pending = b""
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
                self._proc.wait(timeout=30)
            self._proc = None

    @property
    def powered_off_cleanly(self) -> bool:
        """After `shutdown`: the console shows systemd reaching power-off."""
        return "reboot: Power down" in self._console()

    def __enter__(self) -> VirtualMachine:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()
