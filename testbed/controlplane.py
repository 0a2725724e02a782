"""A throwaway local Kubernetes control plane: real etcd and kube-apiserver, and on
request the real kube-scheduler and kube-controller-manager.

Used by the test suite (a session-scoped fixture) and by the demo. The binaries
come from ``hack/build-control-plane.sh`` (built from pinned Go modules, cached
outside the repo) or from the envtest variables ``KUBEBUILDER_ASSETS`` /
``TEST_ASSET_KUBE_APISERVER`` + ``TEST_ASSET_ETCD``.

What it sets up, and why:

- etcd and kube-apiserver on free loopback ports with data in a temporary dir;
  with `scheduler=True` / `controllers=True` also kube-scheduler (its
  KubeSchedulerConfiguration given as a mapping, e.g. with the nodeqos
  extender) and kube-controller-manager, each under its own bootstrap identity
  (see `testbed.components`); fast tests leave both off;
- certificates and the service-account signing key from ``certgen`` (a Go
  helper built with the binaries, so Python needs no crypto package);
- with `bind_address="0.0.0.0"` it serves on every host address, for pods of
  real nodes reaching it through the ``kubernetes`` Service (10.0.0.1, in the
  serving certificate; `testbed.localnodes` routes it);
- RBAC authorization, a static admin token in ``system:masters`` and the
  TokenRequest API, so tests can act as other identities and see real 403s;
- the ``ServiceAccount`` admission plugin off unless asked for: without the
  controller manager nobody creates ``default`` service accounts, and even with
  it a test's fresh namespace would race the controller;
- children die with us: each is started in its own session with
  ``PR_SET_PDEATHSIG``, and ``stop()`` runs on exit, SIGTERM and Ctrl-C paths.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from testbed import components

log = logging.getLogger(__name__)

BUILD_SCRIPT = Path(__file__).resolve().parent.parent / "hack" / "build-control-plane.sh"
MINOR_BUILD_SCRIPT = BUILD_SCRIPT.with_name("build-minor.sh")
# The environment variable naming an older supported minor ("1.34") whose
# kube-apiserver, kube-scheduler and kube-controller-manager (and, in
# testbed.localnodes, kubelet) the whole run uses instead of the pinned one:
# how `make e2e-matrix` runs the real-node suite on each minor.
MINOR_ENV = "NODEQOS_KUBE_MINOR"
CONTROL_PLANE_COMPONENTS = ("kube-apiserver", "kube-scheduler", "kube-controller-manager")
CRDS_DIR = Path(__file__).resolve().parent.parent / "deploy" / "crds"

HOW_TO_BUILD = (
    "Build the local control plane with `make control-plane` (needs Go >= 1.26 and the Go "
    "module proxy), or point KUBEBUILDER_ASSETS at a directory holding kube-apiserver and etcd."
)

_PR_SET_PDEATHSIG = 1

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
# The first address of the range: the API server gives it to the `kubernetes`
# Service in `default`, and certgen puts it in the serving certificate.
KUBERNETES_SERVICE_IP = "10.0.0.1"
# The API server dials a webhook's or an aggregated API's Service at its endpoints, not at
# its ClusterIP: nothing here routes a ClusterIP (no kube-proxy), and a call to one would
# leave the machine.
DIAL_ENDPOINTS = "--enable-aggregator-routing=true"


# How long a component may take to answer its readiness check. A kube-apiserver
# alone is ready in 5-10 s; on a shared 2-core machine under a full test run and
# helpers' builds (load 15-20) starts and restarts took over 60 s, so a slow
# start is waited for and only a component that never comes up fails the run.
START_TIMEOUT = 180.0


class ControlPlaneError(RuntimeError):
    """The control plane could not be found, built or started; the message says what to do."""


@dataclass(frozen=True, slots=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path
    certgen: Path
    kube_scheduler: Path
    kube_controller_manager: Path

    @classmethod
    def in_dir(cls, directory: Path, *, needed: Sequence[str] = ()) -> Binaries:
        """The binaries in `directory`; all of them must be there unless `needed` names some."""
        found = cls(
            directory / "etcd",
            directory / "kube-apiserver",
            directory / "certgen",
            directory / "kube-scheduler",
            directory / "kube-controller-manager",
        )
        missing = [
            str(p)
            for p in (
                found.etcd,
                found.kube_apiserver,
                found.certgen,
                found.kube_scheduler,
                found.kube_controller_manager,
            )
            if not os.access(p, os.X_OK) and (not needed or p.name in needed)
        ]
        if missing:
            raise ControlPlaneError(
                f"missing control plane binaries: {', '.join(missing)}. {HOW_TO_BUILD}"
            )
        return found


def find_binaries(
    *, build: bool = True, minor: str | None = None, needed: Sequence[str] = ()
) -> Binaries:
    """Locate the binaries: those of `minor` (default $NODEQOS_KUBE_MINOR) when it names an
    older supported minor (only the `needed` ones are built; all three by default), else
    $NODEQOS_CONTROL_PLANE_BIN, else run the (cached) build script."""
    minor = (minor or "").removeprefix("v") or run_minor()
    if minor != pinned_minor():
        want = [name for name in needed if name in CONTROL_PLANE_COMPONENTS]
        return Binaries.in_dir(
            build_minor(minor, want or CONTROL_PLANE_COMPONENTS), needed=("etcd", "certgen", *want)
        )
    preset = os.environ.get("NODEQOS_CONTROL_PLANE_BIN")
    if preset:
        return Binaries.in_dir(Path(preset))
    if not build or not BUILD_SCRIPT.exists():
        raise ControlPlaneError(f"NODEQOS_CONTROL_PLANE_BIN is not set. {HOW_TO_BUILD}")
    return Binaries.in_dir(_run_build([str(BUILD_SCRIPT)]))


def pinned_minor() -> str:
    """The Kubernetes minor hack/go.mod pins ("1.37"): the newest, the suite's default."""
    for line in (BUILD_SCRIPT.parent / "go.mod").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "k8s.io/kubernetes":
            return ".".join(fields[1].removeprefix("v").split(".")[:2])
    raise ControlPlaneError("hack/go.mod pins no k8s.io/kubernetes")


def run_minor() -> str:
    """The minor this run uses: $NODEQOS_KUBE_MINOR, else the pinned one."""
    return os.environ.get(MINOR_ENV, "").removeprefix("v") or pinned_minor()


def supported_minors() -> list[str]:
    """Every minor the build can make, oldest first: hack/minor/v*/ and the pinned one."""
    older = [p.name.removeprefix("v") for p in (BUILD_SCRIPT.parent / "minor").glob("v1.*")]
    return sorted({*older, pinned_minor()}, key=lambda m: tuple(int(x) for x in m.split(".")))


def build_minor(minor: str, binaries: Sequence[str]) -> Path:
    """Build (once, cached) `binaries` of an older minor; the directory holding them."""
    return _run_build([str(MINOR_BUILD_SCRIPT), minor, *binaries])


def _run_build(command: list[str]) -> Path:
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as err:
        raise ControlPlaneError(f"cannot run {command[0]}: {err}. {HOW_TO_BUILD}") from err
    if done.returncode != 0:
        raise ControlPlaneError(done.stderr.strip() or f"{command[0]} failed. {HOW_TO_BUILD}")
    return Path(done.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def die_with_parent() -> None:
    """Run in a child between fork and exec: own session, SIGKILL when we die."""
    os.setsid()
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def terminate(proc: subprocess.Popen[bytes] | None, grace: float = 10.0) -> None:
    """SIGTERM a child, SIGKILL it after `grace` seconds; None or exited is fine."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass(frozen=True, slots=True)
class Identity:
    """Credentials for one user of the local API server."""

    name: str
    token: str
    kubeconfig: Path


class ControlPlane:
    """etcd + kube-apiserver on loopback (and optionally kube-scheduler and
    kube-controller-manager). Use as a context manager, or start()/stop()."""

    ADMIN_USER = "nodeqos-admin"

    def __init__(
        self,
        binaries: Binaries | None = None,
        *,
        workdir: Path | None = None,
        crds_dir: Path | None = CRDS_DIR,
        start_timeout: float = START_TIMEOUT,
        scheduler: bool = False,
        scheduler_config: Mapping[str, Any] | None = None,
        controllers: bool | Sequence[str] = False,
        service_account_admission: bool = False,
        nodes: Sequence[str] = (),
        bind_address: str = "127.0.0.1",
        apiserver_feature_gates: Mapping[str, bool] | None = None,
        apiserver_args: Sequence[str] = (),
    ) -> None:
        self._binaries = binaries
        # Extra kube-apiserver flags (the aggregation layer's front-proxy, for one).
        self._apiserver_extra = tuple(apiserver_args)
        # For tests of clients against a server without a feature (WatchList off, say).
        self._apiserver_feature_gates = dict(apiserver_feature_gates or {})
        # 127.0.0.1 keeps the API server off the network; real nodes (testbed.localnodes)
        # need 0.0.0.0 so their pods reach it through the `kubernetes` Service.
        # Clients here always use the loopback URL either way.
        self.bind_address = bind_address
        self._want_scheduler = scheduler
        self._scheduler_base = scheduler_config
        self._controllers: tuple[str, ...] = (
            components.DEFAULT_CONTROLLERS if controllers is True else tuple(controllers or ())
        )
        self._service_account_admission = service_account_admission
        # Kubelets of real nodes (testbed.localnodes): user system:node:<name> in
        # group system:nodes, which the Node authorizer serves.
        self._node_tokens = {name: secrets.token_hex(16) for name in nodes}
        self._component_tokens = {
            components.SCHEDULER_USER: secrets.token_hex(16),
            components.CONTROLLER_MANAGER_USER: secrets.token_hex(16),
        }
        self._scheduler: subprocess.Popen[bytes] | None = None
        self._controller_manager: subprocess.Popen[bytes] | None = None
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="nodeqos-cp-"))
        self._crds_dir = crds_dir
        self._start_timeout = start_timeout
        self._admin_token = secrets.token_hex(16)
        self._etcd: subprocess.Popen[bytes] | None = None
        self._etcd_args: list[str] = []
        self._apiserver: subprocess.Popen[bytes] | None = None
        self._logs: list[IO[bytes]] = []
        self.etcd_port = 0
        self.secure_port = 0

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def binaries(self) -> Binaries:
        if self._binaries is None:
            self._binaries = find_binaries()
        return self._binaries

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.secure_port}"

    @property
    def ca_file(self) -> Path:
        return self.workdir / "pki" / "ca.crt"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    def start(self) -> None:
        """Start etcd and the API server, wait for /readyz, install the CRDs."""
        try:
            self._write_key_material()
            self._start_etcd()
            self.start_apiserver()
            self._write_kubeconfig(self.kubeconfig, self.ADMIN_USER, self._admin_token)
            for user, token in self._component_tokens.items():
                self._write_kubeconfig(self._component_kubeconfig(user), user, token)
            if self._crds_dir is not None:
                self.install_crds(self._crds_dir)
            if self._controllers:
                self.start_controller_manager()
            if self._want_scheduler:
                self.start_scheduler(self._scheduler_base)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every process (SIGTERM, then SIGKILL) and remove the work dir we made."""
        self.stop_scheduler()
        self.stop_controller_manager()
        self.stop_apiserver()
        terminate(self._etcd)
        self._etcd = None
        for handle in self._logs:
            handle.close()
        self._logs.clear()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def start_apiserver(self) -> None:
        """(Re)start kube-apiserver against the running etcd; waits until ready."""
        if self._apiserver is not None:
            return
        for attempt in range(3):
            if not self.secure_port or attempt:
                self.secure_port = free_port()
            self._apiserver = self._spawn("kube-apiserver", self._apiserver_args())
            try:
                self._wait_ready(self._apiserver, "kube-apiserver")
                return
            except ControlPlaneError as err:
                terminate(self._apiserver)
                self._apiserver = None
                if "address already in use" not in str(err) or attempt == 2:
                    raise
                log.warning(
                    "port %d was taken; retrying kube-apiserver on another port", self.secure_port
                )

    def stop_apiserver(self) -> None:
        """Stop kube-apiserver only (etcd keeps the data): an API outage for tests."""
        terminate(self._apiserver)
        self._apiserver = None

    # -- kube-scheduler and kube-controller-manager -----------------------------------

    def start_scheduler(self, config: Mapping[str, Any] | None = None) -> None:
        """Start kube-scheduler with `config` (a KubeSchedulerConfiguration mapping:
        profiles, extenders) on this cluster; waits for its /healthz. A running
        scheduler is restarted, so a test can switch configurations."""
        self.stop_scheduler()
        user = components.SCHEDULER_USER
        kubeconfig = self._component_kubeconfig(user)
        config_file = components.write_scheduler_config(
            self.workdir / "kube-scheduler.yaml", components.scheduler_config(kubeconfig, config)
        )
        port = free_port()
        self._scheduler = self._spawn(
            "kube-scheduler",
            components.scheduler_args(
                config_file, kubeconfig, port, self.workdir / "kube-scheduler-certs"
            ),
        )
        self._wait_component(self._scheduler, "kube-scheduler", port)

    def stop_scheduler(self) -> None:
        terminate(self._scheduler)
        self._scheduler = None

    def start_controller_manager(self) -> None:
        """Start kube-controller-manager with this plane's controllers; waits for /healthz."""
        if self._controller_manager is not None:
            return
        kubeconfig = self._component_kubeconfig(components.CONTROLLER_MANAGER_USER)
        port = free_port()
        self._controller_manager = self._spawn(
            "kube-controller-manager",
            components.controller_manager_args(
                kubeconfig,
                port,
                self.workdir / "kube-controller-manager-certs",
                self.workdir / "pki",
                self._controllers or components.DEFAULT_CONTROLLERS,
            ),
        )
        self._wait_component(self._controller_manager, "kube-controller-manager", port)

    def stop_controller_manager(self) -> None:
        terminate(self._controller_manager)
        self._controller_manager = None

    def _component_kubeconfig(self, user: str) -> Path:
        return self.workdir / f"{user.split(':')[-1]}.kubeconfig"

    def _wait_component(self, proc: subprocess.Popen[bytes], name: str, port: int) -> None:
        # Both serve /healthz with a self-signed certificate of their own.
        self._wait_http(proc, name, f"https://127.0.0.1:{port}/healthz", None, verify=False)

    def compact_etcd(self) -> int:
        """Compact etcd at its current revision (old resourceVersions then answer 410 Gone)."""
        base = f"http://127.0.0.1:{self.etcd_port}/v3"
        status = self._etcd_post(f"{base}/kv/range", {"key": "AA==", "limit": 1})
        revision = int(status["header"]["revision"])
        self._etcd_post(f"{base}/kv/compaction", {"revision": revision, "physical": True})
        return revision

    @staticmethod
    def _etcd_post(url: str, body: Any) -> Any:
        req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    # -- identities --------------------------------------------------------

    def admin(self) -> Identity:
        return Identity(self.ADMIN_USER, self._admin_token, self.kubeconfig)

    def service_account(
        self, namespace: str, name: str, *, create: bool = True, node: str | None = None
    ) -> Identity:
        """A token for ServiceAccount namespace/name from the TokenRequest API.

        With `node`, the token is bound to that Node object (boundObjectRef kind
        Node, GA since Kubernetes 1.33): the API server then puts the node's name
        in the user's extra info under `authentication.kubernetes.io/node-name`,
        as it does for the Pod-bound tokens the kubelet mounts into a DaemonSet's
        Pods. The Node must exist; the token dies with it.
        """
        if create:
            self.request(
                "POST",
                f"/api/v1/namespaces/{namespace}/serviceaccounts",
                {"metadata": {"name": name}},
                ok_conflict=True,
            )
        spec: dict[str, Any] = {"expirationSeconds": 3600}
        if node is not None:
            found = self.request("GET", f"/api/v1/nodes/{node}")
            spec["boundObjectRef"] = {
                "apiVersion": "v1",
                "kind": "Node",
                "name": node,
                "uid": found["metadata"]["uid"],
            }
        issued = self.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
        )
        token = str(issued["status"]["token"])
        suffix = f"-{node}" if node is not None else ""
        path = self.workdir / f"sa-{namespace}-{name}{suffix}.kubeconfig"
        self._write_kubeconfig(path, f"system:serviceaccount:{namespace}:{name}", token)
        return Identity(f"system:serviceaccount:{namespace}:{name}", token, path)

    def node_kubeconfig(self, name: str) -> Path:
        """A kubeconfig for the kubelet of node `name` (one of the `nodes` given at start)."""
        try:
            token = self._node_tokens[name]
        except KeyError:
            raise ControlPlaneError(
                f"no identity for node {name!r}: pass it in ControlPlane(nodes=[...])"
            ) from None
        path = self.workdir / f"node-{name}.kubeconfig"
        self._write_kubeconfig(path, f"system:node:{name}", token)
        return path

    # -- a minimal admin REST helper (setup only; product code uses kube.rest) --

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        ok_conflict: bool = False,
        token: str | None = None,
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {token or self._admin_token}")
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, context=self._ssl(), timeout=30) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as err:
            if ok_conflict and err.code == 409:
                return None
            raise ControlPlaneError(
                f"{method} {path}: HTTP {err.code}: {err.read()[:500]!r}"
            ) from err

    def install_crds(self, directory: Path, *, timeout: float = 30.0) -> list[str]:
        """Create every CRD in directory (*.yaml) and wait until each is Established."""
        import yaml  # local: only needed here

        names = []
        for path in sorted(directory.glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if not doc or doc.get("kind") != "CustomResourceDefinition":
                    continue
                self.request(
                    "POST",
                    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                    doc,
                    ok_conflict=True,
                )
                names.append(str(doc["metadata"]["name"]))
        deadline = time.monotonic() + timeout
        for name in names:
            while True:
                crd = self.request(
                    "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
                )
                conditions = {
                    c["type"]: c["status"]
                    for c in (crd.get("status") or {}).get("conditions") or []
                }
                if conditions.get("Established") == "True":
                    break
                if time.monotonic() > deadline:
                    raise ControlPlaneError(
                        f"CRD {name} not Established after {timeout}s: {conditions}"
                    )
                time.sleep(0.1)
        # Discovery for new groups lags a moment behind Established.
        for name in names:
            plural, group = name.split(".", 1)
            crd = self.request(
                "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
            )
            version = crd["spec"]["versions"][0]["name"]
            while True:
                try:
                    self.request("GET", f"/apis/{group}/{version}/{plural}?limit=1")
                    break
                except ControlPlaneError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        return names

    # -- internals -----------------------------------------------------------

    def _ssl(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def _write_key_material(self) -> None:
        pki = self.workdir / "pki"
        done = subprocess.run(
            [str(self.binaries.certgen), str(pki)], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise ControlPlaneError(f"certgen failed: {done.stderr.strip()}. {HOW_TO_BUILD}")
        lines = [f'{self._admin_token},{self.ADMIN_USER},uid-admin,"system:masters"']
        # The scheduler's and controller manager's users, bound by bootstrap RBAC.
        lines += [f"{token},{user},uid-{user}" for user, token in self._component_tokens.items()]
        lines += [
            f'{token},system:node:{name},uid-node-{name},"system:nodes"'
            for name, token in self._node_tokens.items()
        ]
        (pki / "tokens.csv").write_text("\n".join(lines) + "\n")

    def stop_etcd(self) -> None:
        """Kill etcd (SIGKILL, no clean shutdown): the API server loses its storage."""
        if self._etcd is not None and self._etcd.poll() is None:
            self._etcd.kill()
            self._etcd.wait()
        self._etcd = None

    def start_etcd(self) -> None:
        """Restart a stopped etcd on its old ports and data dir (the API server's
        --etcd-servers still points there); waits for /health."""
        if self._etcd is not None:
            return
        self._etcd = self._spawn("etcd", self._etcd_args)
        self._wait_http(self._etcd, "etcd", f"http://127.0.0.1:{self.etcd_port}/health", None)

    def _start_etcd(self) -> None:
        for attempt in range(3):
            self.etcd_port = free_port()
            peer_port = free_port()
            self._etcd_args = [
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync",  # throwaway data: fsync only slows tests
                "--log-level=warn",
            ]
            self._etcd = self._spawn("etcd", self._etcd_args)
            try:
                self._wait_http(
                    self._etcd, "etcd", f"http://127.0.0.1:{self.etcd_port}/health", None
                )
                return
            except ControlPlaneError as err:
                terminate(self._etcd)
                self._etcd = None
                if "address already in use" not in str(err) or attempt == 2:
                    raise

    def _apiserver_args(self) -> list[str]:
        pki = self.workdir / "pki"
        return [
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            f"--bind-address={self.bind_address}",
            f"--secure-port={self.secure_port}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--token-auth-file={pki / 'tokens.csv'}",
            # Node first: it alone authorizes kubelets (system:nodes), as in kubeadm clusters.
            "--authorization-mode=Node,RBAC",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            *(
                ()
                if self._service_account_admission
                else ("--disable-admission-plugins=ServiceAccount",)
            ),
            "--allow-privileged=true",
            "--endpoint-reconciler-type=none",
            f"--cert-dir={pki}",
            *self._feature_gates_flag(),
            *self._apiserver_extra,
            "--v=0",
        ]

    def _feature_gates_flag(self) -> list[str]:
        gates = sorted(self._apiserver_feature_gates.items())
        if not gates:
            return []
        return ["--feature-gates=" + ",".join(f"{name}={str(on).lower()}" for name, on in gates)]

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        binary = getattr(self.binaries, name.replace("-", "_"))
        if not os.access(binary, os.X_OK):
            raise ControlPlaneError(
                f"no {name} at {binary}: this control plane was built without it "
                f"(find_binaries(needed=...) names the binaries a run needs)"
            )
        log_path = self.workdir / f"{name}.log"
        handle = log_path.open("ab")
        self._logs.append(handle)
        try:
            return subprocess.Popen(
                [str(binary), *args],
                stdout=handle,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent,
            )
        except OSError as err:
            raise ControlPlaneError(f"cannot start {binary}: {err}. {HOW_TO_BUILD}") from err

    def _wait_ready(self, proc: subprocess.Popen[bytes], name: str) -> None:
        self._wait_http(proc, name, f"{self.url}/readyz", self._admin_token)

    def _wait_http(
        self,
        proc: subprocess.Popen[bytes],
        name: str,
        url: str,
        token: str | None,
        *,
        verify: bool = True,
    ) -> None:
        deadline = time.monotonic() + self._start_timeout
        context: ssl.SSLContext | None = None
        if url.startswith("https"):
            context = self._ssl() if verify else ssl._create_unverified_context()
        while True:
            if proc.poll() is not None:
                raise ControlPlaneError(
                    f"{name} exited with status {proc.returncode}: {self._log_tail(name)}"
                )
            req = urllib.request.Request(url)
            if token:
                req.add_header("Authorization", f"Bearer {token}")
            try:
                with urllib.request.urlopen(req, context=context, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"{name} not ready after {self._start_timeout}s: {self._log_tail(name)}"
                )
            time.sleep(0.2)

    def _log_tail(self, name: str, lines: int = 15) -> str:
        path = self.workdir / f"{name}.log"
        try:
            text = path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def _write_kubeconfig(self, path: Path, user: str, token: str) -> None:
        import yaml

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {"server": self.url, "certificate-authority": str(self.ca_file)},
                }
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
            "current-context": "local",
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)


@contextlib.contextmanager
def running(binaries: Binaries | None = None) -> Iterator[ControlPlane]:
    with ControlPlane(binaries) as plane:
        yield plane
