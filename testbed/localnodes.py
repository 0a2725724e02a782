"""Real Kubernetes nodes on this one machine: per node a containerd and a kubelet.

Used by the e2e suite (`make e2e`, tests/e2e) against a `testbed.controlplane.ControlPlane`
started with `nodes=[...]` (each kubelet gets its own identity) and the node
lifecycle controller (it lifts the not-ready taint). The binaries come from
``hack/node-setup.sh``: containerd, runc and the CNI plugins from Debian, the
kubelet built from the pinned k8s.io/kubernetes.

Each node is its own world, so the nodes do not see each other's pods:

- containerd with its own root, state, sockets and runc state dir (`Root`),
  the cgroupfs driver, and a bridge CNI network of its own (bridge ``nqbr<i>``,
  pod subnet ``10.244.<i>.0/24``, host-local IPAM state under the node dir);
- a kubelet with its own root dir, pod log dir, ports, node name and cgroup
  root (``/nodeqos-<name>``, so its pods live under
  ``/sys/fs/cgroup/<subsystem>/nodeqos-<name>/kubepods``);
- images imported from local builds (`testbed.ociimage`), never pulled.

Machine facts handled here (found on the development VM, Debian 12, kernel 6.18):

- cgroup v1 with cgroup v2 unified beside it and no systemd as PID 1: the
  cgroupfs driver, and ``failCgroupV1: false`` (kubelets >= 1.35 refuse v1
  otherwise);
- containerd 1.6 (Debian 12) has no CRI RuntimeConfig; the kubelet then falls
  back to the cgroup driver of its own configuration (it logs that once);
- no CAP_SYS_RESOURCE: runc cannot lower a process's oom_score_adj, and the
  kubelet asks -998 for every sandbox and -997 for Guaranteed containers
  ("failed to update /proc/self/oom_score_adj: Permission denied"). containerd's
  ``restrict_oom_score_adj`` clamps those to containerd's own score;
- the kubelet refuses a loopback node IP, so it picks the host's address; it
  serves its API on loopback only (no logs/exec through the API server);
- no kube-proxy: with the API server bound to every address, `running_nodes`
  routes the ``kubernetes`` Service (10.0.0.1:443) to it (`testbed.servicenat`),
  so in-cluster clients in pods work as on a real cluster; the other way round,
  the API server dials a Service's endpoints itself (`controlplane.DIAL_ENDPOINTS`,
  the EndpointSlice controller running), so webhooks and aggregated APIs served
  from pods answer. Without it the API server dials the ClusterIP, which nothing
  routes here: the call leaves the machine (`control_plane` makes both right).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

from testbed import components, controlplane, machinelock, nodeconfig, ociimage, servicenat

log = logging.getLogger(__name__)

SETUP_SCRIPT = Path(__file__).resolve().parent.parent / "hack" / "node-setup.sh"
HOW_TO_SET_UP = (
    "Prepare the machine with `hack/node-setup.sh` (as root; installs containerd, runc, the "
    "CNI plugins and busybox-static from Debian and builds the kubelet)."
)

PAUSE_IMAGE = nodeconfig.PAUSE_IMAGE
BUSYBOX_IMAGE = "nodeqos.local/busybox:1"
CGROUP_ROOT = Path("/sys/fs/cgroup")
K8S_NAMESPACE = "k8s.io"  # containerd namespace of the CRI plugin


class NodeError(RuntimeError):
    """A node could not be set up, started or stopped; the message says what to do."""


@dataclass(frozen=True, slots=True)
class NodeBinaries:
    kubelet: Path
    containerd: Path
    ctr: Path

    @classmethod
    def find(cls, *, setup: bool = True) -> NodeBinaries:
        """The kubelet from $NODEQOS_NODE_BIN, else from (cached) hack/node-setup.sh; the
        kubelet of $NODEQOS_KUBE_MINOR when that names an older minor (the host checked
        by hack/node-setup.sh all the same)."""
        directory = os.environ.get("NODEQOS_NODE_BIN")
        minor = controlplane.run_minor()
        if not directory:
            if not setup:
                raise NodeError(f"NODEQOS_NODE_BIN is not set. {HOW_TO_SET_UP}")
            done = subprocess.run([str(SETUP_SCRIPT)], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise NodeError(done.stderr.strip() or f"{SETUP_SCRIPT} failed. {HOW_TO_SET_UP}")
            directory = done.stdout.strip().splitlines()[-1]
        if minor != controlplane.pinned_minor():
            try:
                directory = str(controlplane.build_minor(minor, ["kubelet"]))
            except controlplane.ControlPlaneError as err:
                raise NodeError(f"no kubelet for Kubernetes {minor}: {err}") from err
        found = cls(
            Path(directory) / "kubelet",
            Path(shutil.which("containerd") or "/usr/bin/containerd"),
            Path(shutil.which("ctr") or "/usr/bin/ctr"),
        )
        missing = [str(p) for p in (found.kubelet, found.containerd, found.ctr) if not p.exists()]
        if missing:
            raise NodeError(f"missing node binaries: {', '.join(missing)}. {HOW_TO_SET_UP}")
        return found


def _cgroup_dirs(name: str) -> list[Path]:
    # The kubelet checks its cgroup root in every v1 hierarchy mounted (named
    # ones such as name=systemd included), not only the ones it writes.
    hierarchies = sorted(
        d for d in CGROUP_ROOT.iterdir() if d.name != "unified" and (d / "tasks").exists()
    )
    return [h / f"nodeqos-{name}" for h in hierarchies]


# cpu.shares of a node's cgroup root. The kubelet gives its `kubepods` 1024
# shares per allocatable core, but those only weigh against kubepods' siblings
# inside this root; the root itself competes at the top level with every other
# process on the shared machine (1024 each), so at load 10-18 a node's pods got
# a small fraction of a core. The v1 maximum makes the pods win against the
# host's noise as on a real node; their own limits and quotas still cap them.
NODE_ROOT_SHARES = 262_144


@dataclass(frozen=True, slots=True)
class RootCPU:
    """The CPU of a node's cgroup root: `cpus`, a cpuset list such as "1", confines
    the node's pods to those CPUs (all of the host's when None); `shares` weighs the
    root against the host's other processes. A bench that keeps the host's noise
    off the node's CPUs gives the root a real node's weight instead (1024 per
    core, as kubelet's kubepods): the kernel's own threads there (ksoftirqd, which
    carries the pods' network traffic) then get their share as on a real node."""

    cpus: str | None = None
    shares: int = NODE_ROOT_SHARES


def _make_cgroup_root(name: str, cpu: RootCPU) -> None:
    """The node's cgroup root in every hierarchy, with `cpu`'s cpuset and shares."""
    for directory in _cgroup_dirs(name):
        directory.mkdir(exist_ok=True)
        if (directory / "cpu.shares").is_file():
            (directory / "cpu.shares").write_text(str(cpu.shares))
        if directory.parent.name == "cpuset":
            # A new v1 cpuset is empty; tasks cannot join it until it has cpus and mems.
            # Written before the kubelet starts: v1 refuses to shrink a cpuset below its
            # children's, and the kubelet's kubepods copies this one when it is made.
            for knob in ("cpuset.cpus", "cpuset.mems"):
                (directory / knob).write_text((directory.parent / knob).read_text())
            if cpu.cpus is not None:
                (directory / "cpuset.cpus").write_text(cpu.cpus)


def _remove_cgroup_tree(top: Path) -> list[Path]:
    """rmdir a cgroup tree bottom-up; returns the dirs that stayed (tasks still in them)."""
    left: list[Path] = []
    if not top.is_dir():
        return left
    for dirpath, _dirnames, _files in sorted(os.walk(top), key=lambda e: -len(e[0])):
        try:
            os.rmdir(dirpath)
        except OSError:
            left.append(Path(dirpath))
    return left


class LocalNode:
    """One node: containerd + kubelet. start()/stop(), or use `running_nodes`."""

    def __init__(
        self,
        plane: controlplane.ControlPlane,
        name: str,
        index: int,
        *,
        binaries: NodeBinaries,
        workdir: Path,
        images: Sequence[Path] = (),
        kubelet_extra: Mapping[str, Any] | None = None,
        start_timeout: float = 90.0,
        cpu: RootCPU = RootCPU(),
    ) -> None:
        if not 1 <= index <= 250:
            raise ValueError(f"node index {index} must be within [1, 250] (its pod subnet)")
        self.plane = plane
        self.name = name
        self.index = index
        self.workdir = workdir
        self._binaries = binaries
        self._images = tuple(images)
        self._kubelet_extra = dict(kubelet_extra or {})
        self._start_timeout = start_timeout
        self.cpu = cpu  # its cgroup root's cpuset and shares
        self._containerd: subprocess.Popen[bytes] | None = None
        self._kubelet: subprocess.Popen[bytes] | None = None
        self._logs: list[IO[bytes]] = []

    @property
    def socket(self) -> Path:
        return self.workdir / "containerd.sock"

    @property
    def cgroup_parent(self) -> str:
        """The kubelet's cgroupRoot: pods live in <hierarchy>/<this>/kubepods."""
        return f"nodeqos-{self.name}"

    def log_path(self, component: str) -> Path:
        return self.workdir / f"{component}.log"

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        """Start containerd, import the images, start the kubelet; wait until the Node is Ready."""
        try:
            self.workdir.mkdir(parents=True, exist_ok=True)
            for sub in ("cni", "pod-logs", "kubelet"):
                (self.workdir / sub).mkdir(exist_ok=True)
            _make_cgroup_root(self.name, self.cpu)
            self.start_containerd()
            for image in self._images:
                self.ctr("images", "import", str(image))
            self.start_kubelet()
            self.wait_ready()
        except BaseException:
            self.stop()
            raise

    def start_containerd(self) -> None:
        config = self.workdir / "containerd.toml"
        config.write_text(nodeconfig.containerd_config(self.workdir))
        (self.workdir / "cni" / "10-nodeqos.conflist").write_text(
            json.dumps(nodeconfig.cni_config(self.name, self.index, self.workdir), indent=1)
        )
        self._containerd = self._spawn(
            "containerd", [str(self._binaries.containerd), "--config", str(config)]
        )
        deadline = time.monotonic() + self._start_timeout
        while self.ctr("version", check=False).returncode != 0:
            if self._containerd.poll() is not None:
                raise NodeError(f"containerd of {self.name} exited: {self._tail('containerd')}")
            if time.monotonic() > deadline:
                raise NodeError(
                    f"containerd of {self.name} not serving: {self._tail('containerd')}"
                )
            time.sleep(0.2)

    def start_kubelet(self) -> None:
        """(Re)start the kubelet; the containers it started keep running meanwhile."""
        if self._kubelet is not None:
            return
        config = self.workdir / "kubelet.yaml"
        ports = (controlplane.free_port(), controlplane.free_port())
        config.write_text(
            yaml.safe_dump(
                nodeconfig.kubelet_config(
                    self.name,
                    self.workdir,
                    port=ports[0],
                    healthz_port=ports[1],
                    extra=self._kubelet_extra,
                )
            )
        )
        self._kubelet = self._spawn(
            "kubelet",
            [
                str(self._binaries.kubelet),
                f"--config={config}",
                f"--kubeconfig={self.plane.node_kubeconfig(self.name)}",
                f"--root-dir={self.workdir / 'kubelet'}",
                f"--hostname-override={self.name}",
                "--v=1",
            ],
        )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + self._start_timeout
        while True:
            if self._kubelet is not None and self._kubelet.poll() is not None:
                raise NodeError(f"kubelet of {self.name} exited: {self._tail('kubelet')}")
            with contextlib.suppress(controlplane.ControlPlaneError):
                node = self.plane.request("GET", f"/api/v1/nodes/{self.name}")
                conditions = node.get("status", {}).get("conditions", [])
                if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                    return
            if time.monotonic() > deadline:
                raise NodeError(f"node {self.name} not Ready after {self._start_timeout}s")
            time.sleep(0.5)

    def stop_kubelet(self) -> None:
        controlplane.terminate(self._kubelet)
        self._kubelet = None

    def stop(self) -> None:
        """Stop the kubelet, every container of the node, containerd; remove what we made.

        Pods should be deleted through the API first (the kubelet then tears
        down their networks); whatever is left is killed through containerd.
        """
        self.stop_kubelet()
        if self._containerd is not None and self._containerd.poll() is None:
            self._kill_all_tasks()
        controlplane.terminate(self._containerd)
        self._containerd = None
        for handle in self._logs:
            handle.close()
        self._logs.clear()
        # The kubelet also makes the root in the v2 hierarchy beside v1 (unified).
        for directory in [*_cgroup_dirs(self.name), CGROUP_ROOT / "unified" / self.cgroup_parent]:
            left = _remove_cgroup_tree(directory)
            if left:
                log.warning("cgroups of node %s still hold tasks: %s", self.name, left[:3])
        with contextlib.suppress(OSError):
            subprocess.run(
                ["ip", "link", "delete", f"nqbr{self.index}"], capture_output=True, check=False
            )
        self._unmount_below(self.workdir)

    def _kill_all_tasks(self) -> None:
        listed = self.ctr("tasks", "list", "--quiet", check=False)
        ids = listed.stdout.split()
        for task in ids:
            self.ctr("tasks", "kill", "--signal", "SIGKILL", task, check=False)
        for task in ids:
            for _ in range(50):
                if self.ctr("tasks", "delete", task, check=False).returncode == 0:
                    break
                time.sleep(0.1)
        for sandbox_netns in self._netns_paths():
            with contextlib.suppress(OSError):
                subprocess.run(["umount", sandbox_netns], capture_output=True, check=False)
                os.unlink(sandbox_netns)

    def _netns_paths(self) -> list[str]:
        # The CRI plugin records each sandbox's netns path in its container spec.
        found = []
        listed = self.ctr("containers", "list", "--quiet", check=False)
        for container in listed.stdout.split():
            info = self.ctr("containers", "info", container, check=False)
            with contextlib.suppress(ValueError, KeyError, TypeError):
                spec = json.loads(info.stdout)["Spec"]
                for ns in spec["linux"]["namespaces"]:
                    if ns["type"] == "network" and ns.get("path"):
                        found.append(ns["path"])
        return found

    @staticmethod
    def _unmount_below(top: Path) -> None:
        # Sandboxes' shm and overlay rootfs mounts left by killed tasks.
        mounts = Path("/proc/self/mounts").read_text().splitlines()
        targets = [m.split()[1] for m in mounts if len(m.split()) > 1]
        for target in sorted((t for t in targets if t.startswith(f"{top}/")), reverse=True):
            subprocess.run(["umount", "-l", target], capture_output=True, check=False)

    # -- helpers -----------------------------------------------------------

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run `ctr` against this node's containerd in the CRI namespace."""
        cmd = [str(self._binaries.ctr), "--address", str(self.socket), "-n", K8S_NAMESPACE, *args]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
        if check and done.returncode != 0:
            raise NodeError(f"{' '.join(cmd)}: {done.stderr.strip()}")
        return done

    def _spawn(self, component: str, argv: list[str]) -> subprocess.Popen[bytes]:
        handle = self.log_path(component).open("ab")
        self._logs.append(handle)
        try:
            return subprocess.Popen(
                argv,
                stdout=handle,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=controlplane.die_with_parent,
            )
        except OSError as err:
            raise NodeError(f"cannot start {argv[0]}: {err}. {HOW_TO_SET_UP}") from err

    def _tail(self, component: str, lines: int = 15) -> str:
        try:
            text = self.log_path(component).read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def build_images(directory: Path) -> list[Path]:
    """The pause and busybox images as OCI archives in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    return [
        ociimage.write_archive(ociimage.pause_image(PAUSE_IMAGE), directory / "pause.tar"),
        ociimage.write_archive(ociimage.busybox_image(BUSYBOX_IMAGE), directory / "busybox.tar"),
    ]


def control_plane(
    names: Sequence[str],
    *,
    binaries: controlplane.Binaries | None = None,
    controllers: Sequence[str] = (),
    apiserver_args: Sequence[str] = (),
) -> controlplane.ControlPlane:
    """The control plane real nodes `names` join: kube-scheduler, the controllers a
    cluster runs (node lifecycle lifts the not-ready taint, EndpointSlices give Services
    their pods) plus `controllers`, an identity per kubelet, and the API server bound to
    every address (pods reach it through the `kubernetes` Service) dialling a Service's
    endpoints itself (no kube-proxy routes a ClusterIP here), with ServiceAccount
    admission (pods get their token as in a real cluster)."""
    return controlplane.ControlPlane(
        binaries,
        scheduler=True,
        controllers=(*components.REAL_NODE_CONTROLLERS, *controllers),
        nodes=names,
        bind_address="0.0.0.0",
        service_account_admission=True,
        apiserver_args=(controlplane.DIAL_ENDPOINTS, *apiserver_args),
    )


@contextlib.contextmanager
def running_nodes(
    plane: controlplane.ControlPlane,
    names: Sequence[str],
    *,
    workdir: Path,
    images: Sequence[Path] = (),
    binaries: NodeBinaries | None = None,
    kubelet_extra: Mapping[str, Any] | None = None,
    cpu: RootCPU = RootCPU(),
) -> Iterator[list[LocalNode]]:
    """Start one node per name (in turn: they share 2 cores at start), stop all on exit.

    One set of nodes per machine at a time (`testbed.machinelock`): bridges, pod
    subnets, cgroup roots and the Service route are machine-wide names.
    """
    binaries = binaries or NodeBinaries.find()
    all_images = [*build_images(workdir / "images"), *images]
    nodes: list[LocalNode] = []
    with machinelock.held(), contextlib.ExitStack() as cleanup:
        cleanup.callback(_stop_all, nodes)
        _start_all(
            plane,
            names,
            nodes,
            workdir=workdir,
            images=all_images,
            binaries=binaries,
            kubelet_extra=kubelet_extra,
            cpu=cpu,
        )
        yield nodes


def _start_all(
    plane: controlplane.ControlPlane,
    names: Sequence[str],
    nodes: list[LocalNode],
    *,
    workdir: Path,
    images: Sequence[Path],
    binaries: NodeBinaries,
    kubelet_extra: Mapping[str, Any] | None = None,
    cpu: RootCPU = RootCPU(),
) -> None:
    for index, name in enumerate(names, start=1):
        node = LocalNode(
            plane,
            name,
            index,
            binaries=binaries,
            workdir=workdir / name,
            images=images,
            kubelet_extra=kubelet_extra,
            cpu=cpu,
        )
        node.start()
        nodes.append(node)
    if nodes and not plane.bind_address.startswith("127."):
        servicenat.install(
            controlplane.KUBERNETES_SERVICE_IP, node_ip(plane, nodes[0].name), plane.secure_port
        )
    else:
        log.info("API server on loopback only: pods cannot reach it (no Service route)")


def _stop_all(nodes: list[LocalNode]) -> None:
    for node in reversed(nodes):
        node.stop()
    servicenat.remove()


def node_ip(plane: controlplane.ControlPlane, name: str) -> str:
    """The InternalIP the kubelet of `name` reports (the host address it picked)."""
    node = plane.request("GET", f"/api/v1/nodes/{name}")
    for address in node.get("status", {}).get("addresses", []):
        if address.get("type") == "InternalIP":
            return str(address["address"])
    raise NodeError(f"node {name} reports no InternalIP: {node.get('status', {}).get('addresses')}")
