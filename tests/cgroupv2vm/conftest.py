"""The cgroup v2 + systemd VM (testbed.vm) for the `cgroupv2vm` tests; `make e2e-cgroupv2`.

One VM per package: booted once (under TCG on a machine whose KVM cannot run
it, ~45 s to a working guest), the product packages, tests/ and the few
third-party packages they import copied in, the guest checks
(guest_checks.py) run there once with pytest, and the VM powered off.

When to run. Always when it can: QEMU, debootstrap and e2fsprogs are installed
with apt-get when missing (hack/vm/host-tools.sh) and the image is built when
not cached (hack/vm/build-image.sh, ~2.5 minutes, once per change of its
inputs). In a plain `pytest` / `make test` what cannot be had (not root, no
apt-get, the Debian mirror unreachable, a guest that does not boot within
BOOT_BUDGET_S) skips, naming the missing piece; `make e2e-cgroupv2` sets
NODEQOS_VM_REQUIRED=1 and the same FAILS.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import subprocess
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import metadata
from importlib import util as importlib_util
from pathlib import Path

import pytest
import yaml

from testbed import controlplane, localnodes, machinelock, vm
from tests.cgroupv2vm import guestnode
from tests.cgroupv2vm.guestnode import API_GUEST_IP, API_GUEST_PORT, GUEST_ROOT, NODE_NAME

REPO = Path(__file__).resolve().parents[2]
NODE_IMAGE_SCRIPT = REPO / "hack" / "node-image.sh"
# hack/node-image.sh's image (the real-node suite's), on its own disk: /dev/vdc.
NODEQOS_IMAGE = "nodeqos.local/nodeqos:dev"
NODEQOS_IMAGE_DISK = "/dev/vdc"
# What the guest checks import, from this checkout.
OUR_PACKAGES = ("agent", "cgroups", "kube", "metriccache", "qosmanager", "tests")
# ... and from this environment: the guest is Debian bookworm with python3.11 and no
# pip packages; these run unchanged there (pure Python, or CPython 3.11 abi builds).
THIRD_PARTY = (
    "psutil",
    "prometheus_client",
    "click",
    "yaml",
    "_yaml",
    "pytest",
    "_pytest",
    "pluggy",
    "iniconfig",
    "packaging",
    "py",
    "pygments",  # pytest's terminal writer imports it
)
# Their metadata too: pytest asks pluggy's version of importlib.metadata.
DISTRIBUTIONS = (
    "psutil",
    "prometheus_client",
    "click",
    "pyyaml",
    "pytest",
    "pluggy",
    "iniconfig",
    "packaging",
    "pygments",
)
# pygments' lexers are most of its 10 MB; pytest uses these.
_PYGMENTS_LEXERS = {"__init__.py", "_mapping.py", "diff.py", "python.py"}
BOOT_BUDGET_S = 240.0
GUEST_PYTEST_TIMEOUT_S = 900.0


@dataclass
class GuestRun:
    """The VM's figures and the outcome of each guest check, by test name."""

    machine: vm.VirtualMachine
    plane: controlplane.ControlPlane | None = None
    plane_missing: str = ""
    agent_image_missing: str = ""  # why hack/node-image.sh's image is not on /dev/vdc
    copy_seconds: float = 0.0
    checks_seconds: float = 0.0
    outcomes: dict[str, str] = field(default_factory=dict)  # passed | failed | skipped
    details: dict[str, str] = field(default_factory=dict)
    output: str = ""


def required() -> bool:
    """`make e2e-cgroupv2`: build what is missing, fail instead of skipping."""
    return os.environ.get("NODEQOS_VM_REQUIRED") == "1"


def _unavailable(message: str) -> None:
    if required():
        pytest.fail(f"the cgroup v2 VM is unavailable: {message}", pytrace=False)
    pytest.skip(f"cgroup v2 VM: {message}")


def _metadata_dir(distribution: str) -> Path | None:
    """The installed `<name>-<version>.dist-info` directory of `distribution`."""
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return None
    for file in dist.files or ():
        if file.name == "METADATA":
            return Path(str(dist.locate_file(file))).parent
    return None


def _module_path(name: str) -> Path | None:
    spec = importlib_util.find_spec(name)
    if spec is None or spec.origin is None:
        return None
    origin = Path(spec.origin)
    return origin.parent if origin.name == "__init__.py" else origin


def find_kubelet() -> Path | None:
    """The pinned kubelet the real-node suite uses ($NODEQOS_NODE_BIN, else hack/node-setup.sh,
    which builds it once); None when it cannot be had (the kubelet check then skips)."""
    directory = os.environ.get("NODEQOS_NODE_BIN")
    if not directory:
        done = subprocess.run(
            [str(REPO / "hack" / "node-setup.sh")],
            capture_output=True,
            text=True,
            env={**os.environ, "NODEQOS_NODE_NO_INSTALL": "1"},
            check=False,
        )
        if done.returncode != 0:
            return None
        directory = done.stdout.strip().splitlines()[-1]
    kubelet = Path(directory) / "kubelet"
    return kubelet if kubelet.is_file() else None


def find_nodeqos_image() -> tuple[Path | None, str]:
    """hack/node-image.sh's OCI archive (built once, cached; the real-node suite's image),
    or None and why not."""
    done = subprocess.run(
        [str(NODE_IMAGE_SCRIPT)], capture_output=True, text=True, check=False, timeout=3600
    )
    if done.returncode != 0:
        return None, f"hack/node-image.sh failed: {done.stderr.strip()[-1000:]}"
    return Path(done.stdout.strip().splitlines()[-1]), ""


def guest_kubeconfig(plane: controlplane.ControlPlane) -> str:
    """The node's kubeconfig as the guest sees the API server: through the guestfwd
    address, the serving certificate checked against its 127.0.0.1 name."""
    node = yaml.safe_load(plane.node_kubeconfig(NODE_NAME).read_text())
    cluster = node["clusters"][0]["cluster"]
    ca = Path(cluster.pop("certificate-authority")).read_bytes()
    cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    cluster["server"] = f"https://{API_GUEST_IP}:{API_GUEST_PORT}"
    cluster["tls-server-name"] = "127.0.0.1"
    return str(yaml.safe_dump(node))


def write_payload(
    path: Path, kubelet: Path | None = None, extra: dict[str, Path] | None = None
) -> None:
    """A tar of src/ (our packages) and site/ (third-party), no caches; the guest reads
    it from a disk (uncompressed: the disk's zero padding ends a tar cleanly)."""

    def skip_cache(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if "__pycache__" in info.name or info.name.endswith(".pyc"):
            return None
        parts = info.name.split("/")
        if parts[1:3] == ["pygments", "lexers"] and len(parts) == 4:
            return info if parts[3] in _PYGMENTS_LEXERS else None
        return info

    with tarfile.open(path, mode="w") as tar:
        for name in OUR_PACKAGES:
            tar.add(REPO / name, arcname=f"src/{name}", filter=skip_cache)
        for name in THIRD_PARTY:
            path = _module_path(name)
            if path is not None:
                tar.add(path, arcname=f"site/{path.name}", filter=skip_cache)
        if kubelet is not None:
            tar.add(kubelet, arcname="bin/kubelet")
        for arcname, source in (extra or {}).items():
            tar.add(source, arcname=arcname)
        for name in DISTRIBUTIONS:
            path = _metadata_dir(name)
            if path is not None:
                tar.add(path, arcname=f"site/{path.name}")


def _parse_junit(text: str) -> tuple[dict[str, str], dict[str, str]]:
    outcomes: dict[str, str] = {}
    details: dict[str, str] = {}
    for case in ET.fromstring(text).iter("testcase"):
        name = case.get("name", "")
        outcome, detail = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, detail = "failed", (child.get("message") or "") + "\n" + (child.text or "")
            elif child.tag == "skipped":
                outcome, detail = "skipped", child.get("message") or ""
        outcomes[name] = outcome
        details[name] = detail
    return outcomes, details


def _say(config: pytest.Config, line: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)


@pytest.fixture(scope="package")
def guest(request: pytest.FixtureRequest) -> Iterator[GuestRun]:
    """The booted VM with the guest checks run once; powered off after the package."""
    if os.geteuid() != 0:
        _unavailable("needs root (QEMU's KVM device, the image build's debootstrap); run as root")
    try:
        # A fresh machine gets QEMU, debootstrap and e2fsprogs (apt-get) and the image
        # (hack/vm/build-image.sh, minutes, cached); what cannot be had skips, naming it.
        vm.install_host_tools()
        image = vm.find_image(build=True)
    except vm.VMError as err:
        _unavailable(str(err))
    with contextlib.ExitStack() as stack:
        workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="nodeqos-vm-"))
        # One VM (or set of real nodes) per machine at a time: both load the 2 cores hard.
        try:
            stack.enter_context(machinelock.held())
        except machinelock.LockTimeout as err:
            _unavailable(str(err))
        plane, plane_missing = None, ""
        try:
            plane = stack.enter_context(
                controlplane.ControlPlane(
                    controlplane.find_binaries(),
                    nodes=(NODE_NAME,),
                    # The agent DaemonSet: the scheduler places its pod, the controllers
                    # make it and the pods' ServiceAccount token and kube-root-ca.crt.
                    scheduler=True,
                    controllers=True,
                    service_account_admission=True,
                )
            )
        except controlplane.ControlPlaneError as err:
            plane_missing = str(err)
        payload = Path(workdir) / "payload.tar"
        extra: dict[str, Path] = {}
        if plane is not None:
            try:
                for archive in localnodes.build_images(Path(workdir) / "images"):
                    extra[f"images/{archive.name}"] = archive
            except (OSError, ValueError) as err:
                plane_missing = f"no pause/busybox images: {err}"
            kubeconfig = Path(workdir) / "node.kubeconfig"
            kubeconfig.write_text(guest_kubeconfig(plane))
            extra["node.kubeconfig"] = kubeconfig
        write_payload(payload, find_kubelet(), extra)
        disks = [payload]
        agent_image, agent_image_missing = find_nodeqos_image()
        if agent_image is not None:
            disks.append(agent_image)
        guestfwd = []
        if plane is not None:
            port = int(plane.url.rsplit(":", 1)[1])
            guestfwd.append((API_GUEST_IP, API_GUEST_PORT, port))
        machine = vm.VirtualMachine(image, Path(workdir), disks=disks, guestfwd=guestfwd)
        try:
            machine.start(timeout=BOOT_BUDGET_S)
        except vm.VMError as err:
            machine.shutdown(timeout=5)
            _unavailable(f"the guest did not come up within {BOOT_BUDGET_S:.0f} s: {err}")
        run = GuestRun(machine, plane, plane_missing, agent_image_missing)
        try:
            started = time.monotonic()
            machine.run(["mkdir", "-p", GUEST_ROOT])
            machine.run(["tar", "-x", "-f", "/dev/vdb", "-C", GUEST_ROOT], timeout=300)
            run.copy_seconds = time.monotonic() - started
            started = time.monotonic()
            done = machine.run(
                [
                    "env",
                    f"PYTHONPATH={GUEST_ROOT}/src:{GUEST_ROOT}/site",
                    "PYTHONDONTWRITEBYTECODE=1",
                    "python3",
                    "-m",
                    "pytest",
                    "-c",
                    f"{GUEST_ROOT}/src/tests/cgroupv2vm/guest-pytest.ini",
                    "--rootdir",
                    f"{GUEST_ROOT}/src",
                    "--noconftest",
                    "-s",
                    f"--junitxml={GUEST_ROOT}/junit.xml",
                    f"{GUEST_ROOT}/src/tests/cgroupv2vm/guest_checks.py",
                ],
                timeout=GUEST_PYTEST_TIMEOUT_S,
                check=False,
            )
            run.checks_seconds = time.monotonic() - started
            run.output = done.text + done.stderr.decode(errors="replace")
            junit = machine.run(["cat", f"{GUEST_ROOT}/junit.xml"], check=False)
            if junit.rc == 0:
                run.outcomes, run.details = _parse_junit(junit.text)
            times = machine.times
            _say(
                request.config,
                f"\ncgroupv2vm: accel={machine.accel.value if machine.accel else '?'}"
                f" image-build={image.build_seconds}s boot-to-systemd={times.systemd or 0:.1f}s"
                f" boot-to-agent={times.agent or 0:.1f}s copy={run.copy_seconds:.1f}s"
                f" guest-checks={run.checks_seconds:.1f}s"
                + (f" (KVM tried: {times.notes[0]})" if times.notes else ""),
            )
            for line in re.findall(r"cgroupv2vm: [^\n]*", run.output):
                _say(request.config, f"  guest {line}")
            yield run
        finally:
            started = time.monotonic()
            machine.shutdown()
            _say(request.config, f"cgroupv2vm: shutdown={time.monotonic() - started:.1f}s")


@dataclass
class JoinedNode:
    """The VM joined to the package's control plane as node NODE_NAME, with its figures."""

    machine: vm.VirtualMachine
    plane: controlplane.ControlPlane
    containerd_seconds: float
    images_seconds: float
    ready_seconds: float


def _missing(message: str) -> None:
    if required():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="package")
def joined(guest: GuestRun, request: pytest.FixtureRequest) -> Iterator[JoinedNode]:
    """The pinned kubelet (cgroupDriver: systemd) in the VM, registered with the host's API
    server and Ready, the pause and busybox images imported, the `kubernetes` Service
    routed; on teardown the kubelet is stopped and every pod killed."""
    if guest.plane is None:
        _missing(f"no control plane: {guest.plane_missing}")
    machine = guest.machine
    if machine.run(["test", "-x", f"{GUEST_ROOT}/bin/kubelet"], check=False).rc != 0:
        _missing("no kubelet was copied in (hack/node-setup.sh builds it)")
    assert guest.plane is not None
    containerd_s = guestnode.start_containerd(machine)
    images_s = sum(
        guestnode.import_image(machine, f"{GUEST_ROOT}/images/{name}.tar", timeout=300)
        for name in ("pause", "busybox")
    )
    guestnode.route_kubernetes_service(machine)
    try:
        guestnode.start_kubelet(machine)
        _, ready_s = guestnode.wait("node Ready", 300, lambda: guestnode.node_ready(guest.plane))
        _say(
            request.config,
            f"cgroupv2vm: containerd={containerd_s:.1f}s pause+busybox-import={images_s:.1f}s"
            f" kubelet-start-to-Ready={ready_s:.1f}s",
        )
        yield JoinedNode(machine, guest.plane, containerd_s, images_s, ready_s)
    finally:
        print(guestnode.stop_node(machine))
