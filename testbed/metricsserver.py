"""The real metrics-server (sigs.k8s.io/metrics-server, pinned in hack/metricsserver)
run on the host against the real local nodes (`testbed.localnodes`), served through
the local API server's aggregation layer as `v1beta1.metrics.k8s.io`.

What the pieces need, and why:

- the API server proxies `/apis/metrics.k8s.io` with a front-proxy client
  certificate that metrics-server trusts through the
  `extension-apiserver-authentication` ConfigMap: `front_proxy_flags` makes a
  throwaway front-proxy CA and client certificate (openssl) and returns the
  kube-apiserver flags; the API server must dial the Service's endpoint directly
  (`controlplane.DIAL_ENDPOINTS`, which `testbed.localnodes.control_plane` passes
  itself: no kube-proxy here);
- metrics-server scrapes each kubelet's `/metrics/resource` at the node's
  InternalIP and the port the node reports (`--kubelet-use-node-status-port`),
  so the kubelets must serve on every address and let metrics-server in:
  `KUBELET_EXTRA` (anonymous authentication; authorization is AlwaysAllow in
  `testbed.nodeconfig`) — acceptable only on a throwaway test node;
- it runs on the host with the admin kubeconfig; the Service has no selector
  and its Endpoints point at the host's node IP.

May import (of ours): `kube` (through `testbed.controlplane`).
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from testbed import controlplane

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "hack" / "build-metrics-server.sh"
KUBELET_EXTRA: dict[str, Any] = {
    "address": "0.0.0.0",
    "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
}
NODES_PATH = "/apis/metrics.k8s.io/v1beta1/nodes"


class MetricsServerError(RuntimeError):
    """metrics-server could not be built, started or served."""


def binary() -> Path:
    """The built metrics-server (hack/build-metrics-server.sh, cached)."""
    done = subprocess.run([str(BUILD)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise MetricsServerError(f"{BUILD} failed: {done.stderr.strip()[-2000:]}")
    return Path(done.stdout.strip().splitlines()[-1]) / "metrics-server"


def _openssl(*args: str) -> None:
    done = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise MetricsServerError(f"openssl {' '.join(args[:2])}: {done.stderr.strip()}")


def front_proxy_flags(pki: Path) -> list[str]:
    """A front-proxy CA and client certificate under `pki`, and the API server flags using them."""
    pki.mkdir(parents=True, exist_ok=True)
    ca, ca_key = pki / "front-proxy-ca.crt", pki / "front-proxy-ca.key"
    crt, key, csr = pki / "front-proxy-client.crt", pki / "front-proxy-client.key", pki / "fp.csr"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
             "-subj", "/CN=front-proxy-ca", "-keyout", str(ca_key), "-out", str(ca))  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=front-proxy-client",
             "-keyout", str(key), "-out", str(csr))  # fmt: skip
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
             "-CAcreateserial", "-days", "2", "-out", str(crt))  # fmt: skip
    return [
        f"--requestheader-client-ca-file={ca}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={crt}",
        f"--proxy-client-key-file={key}",
    ]


def _register(plane: controlplane.ControlPlane, host_ip: str, port: int) -> None:
    ns = "/api/v1/namespaces/kube-system"
    plane.request(
        "POST",
        f"{ns}/services",
        {
            "metadata": {"name": "metrics-server"},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]},
        },
        ok_conflict=True,
    )
    plane.request(
        "POST",
        f"{ns}/endpoints",
        {
            "metadata": {"name": "metrics-server"},
            "subsets": [
                {"addresses": [{"ip": host_ip}], "ports": [{"name": "https", "port": port}]}
            ],
        },
        ok_conflict=True,
    )
    # The aggregator resolves the Service through EndpointSlices (k8s >= 1.33); no
    # mirroring controller runs here, so the slice is written alongside.
    plane.request(
        "POST",
        "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices",
        {
            "metadata": {
                "name": "metrics-server-host",
                "labels": {"kubernetes.io/service-name": "metrics-server"},
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [host_ip], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        },
        ok_conflict=True,
    )
    plane.request(
        "POST",
        "/apis/apiregistration.k8s.io/v1/apiservices",
        {
            "metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {
                "service": {"namespace": "kube-system", "name": "metrics-server", "port": 443},
                "group": "metrics.k8s.io",
                "version": "v1beta1",
                "insecureSkipTLSVerify": True,
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
            },
        },
        ok_conflict=True,
    )


@contextlib.contextmanager
def running(
    plane: controlplane.ControlPlane,
    host_ip: str,
    nodes: Sequence[str],
    *,
    workdir: Path,
    resolution: str = "15s",  # must exceed --kubelet-request-timeout (10s)
    timeout: float = 120.0,
    kubelet_args: Sequence[str] = ("--kubelet-insecure-tls",),
) -> Iterator[subprocess.Popen[bytes]]:
    """metrics-server serving `metrics.k8s.io` for `nodes` (waits until it lists them all).

    `kubelet_args`: how it talks to the kubelets (testbed.resourcemetrics.KUBELET_ARGS
    for that module's stand-in)."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = controlplane.free_port()
    log_path = workdir / "metrics-server.log"
    argv = [
        str(binary()),
        f"--secure-port={port}",
        f"--cert-dir={workdir / 'certs'}",
        f"--kubeconfig={plane.kubeconfig}",
        f"--authentication-kubeconfig={plane.kubeconfig}",
        f"--authorization-kubeconfig={plane.kubeconfig}",
        *kubelet_args,
        "--kubelet-use-node-status-port",
        "--kubelet-preferred-address-types=InternalIP",
        f"--metric-resolution={resolution}",
        "--v=1",
    ]
    with log_path.open("ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        _register(plane, host_ip, port)
        deadline = time.monotonic() + timeout
        last = ""
        while True:
            if proc.poll() is not None:
                raise MetricsServerError(f"metrics-server exited: {_tail(log_path)}")
            try:
                listed = plane.request("GET", NODES_PATH)
                names = {i["metadata"]["name"] for i in listed.get("items", [])}
                if set(nodes) <= names:
                    break
                last = f"lists {sorted(names)}"
            except controlplane.ControlPlaneError as err:
                last = str(err)
            if time.monotonic() > deadline:
                status = plane.request(
                    "GET", "/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io"
                ).get("status")
                raise MetricsServerError(
                    f"GET {NODES_PATH} never listed {sorted(nodes)} ({last});"
                    f" APIService status {status};"
                    f" metrics-server log: {_tail(log_path)}"
                )
            time.sleep(2)
        yield proc
    finally:
        controlplane.terminate(proc)


def _tail(path: Path, lines: int = 20) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
