"""An online server on a real node, and its tail latency under an open-loop load.

Shared by `python -m bench interference` and the colocation scenario
(`testbed.colocationloop`, in `make demo` and the e2e test). The server is
Debian's nginx in a locally built image (`testbed.ociimage.nginx_image`: one
worker, a 16 KiB page gzipped for every request) in an LS Burstable pod: a CPU
request and no CPU limit, so no quota throttles it. `measure` drives it with
vegeta (`testbed.vegeta`) at one constant rate and reads vegeta's own latency
figures, and the CPU the node's cgroup root used over the same seconds.

Imports `kube` and `testbed` only.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kube import rest
from testbed import localcluster, ociimage, placementwatch, vegeta

IMAGE = "nodeqos.local/nginx:1"
CPU_REQUEST = "300m"
NAME = "web"
# cgroup v1, as testbed.localnodes requires; a node's root is nodeqos-<node>
CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class NotReady(RuntimeError):
    """The server pod did not become Ready; the message says why, from its status."""


@dataclass(frozen=True, slots=True)
class Server:
    url: str
    uid: str
    node: str


@dataclass(frozen=True, slots=True)
class Sample:
    """One constant-rate load: vegeta's figures (ms) and the node's CPU meanwhile."""

    rate: int
    requests: int
    errors: int
    p50_ms: float
    p99_ms: float
    p999_ms: float
    node_cpu_percent: float  # of the node's capacity

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def image_archive(directory: Path) -> Path:
    """The nginx image as an OCI archive in `directory`, for the nodes to import."""
    directory.mkdir(parents=True, exist_ok=True)
    return ociimage.write_archive(ociimage.nginx_image(IMAGE), directory / "nginx.tar")


def pod(
    namespace: str, *, node: str | None = None, name: str = NAME, cpu_request: str = CPU_REQUEST
) -> dict[str, Any]:
    """nginx in an LS Burstable pod; on `node` when given (nodeName: no scheduling)."""
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "nginx",
                "image": IMAGE,
                "imagePullPolicy": "Never",
                "resources": {
                    "requests": {"cpu": cpu_request, "memory": "32Mi"},
                    "limits": {"memory": "64Mi"},
                },
                "readinessProbe": {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 2},
            }
        ],
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": False,
    }
    if node is not None:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app": name, "koordinator.sh/qosClass": "LS"},
        },
        "spec": spec,
    }


def start(
    kube: rest.Rest,
    namespace: str,
    *,
    node: str | None = None,
    name: str = NAME,
    cpu_request: str = CPU_REQUEST,
    timeout: float = 120.0,
) -> Server:
    """The server pod created in `namespace` (which must exist) and Ready; NotReady if not."""
    manifest = pod(namespace, node=node, name=name, cpu_request=cpu_request)
    kube.create(f"/api/v1/namespaces/{namespace}/pods", manifest)
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"

    def ready() -> dict[str, Any] | None:
        try:
            found = kube.get(path)
        except rest.ApiUnavailable:  # a busy API server is "not yet"
            return None
        return found if placementwatch.ready(found) else None

    try:
        found = localcluster.wait_for(ready, "the online nginx pod Ready", timeout=timeout)
    except TimeoutError as err:
        raise NotReady(f"nginx pod not Ready: {problem(kube.get(path))}") from err
    return Server(
        url=f"http://{found['status']['podIP']}/",
        uid=str(found["metadata"]["uid"]),
        node=str(found["spec"]["nodeName"]),
    )


def problem(pod: Mapping[str, Any]) -> str:
    """Why a pod is not Ready, from its status (for a failure message)."""
    status = pod.get("status", {})
    for container in status.get("containerStatuses", []):
        for key in ("waiting", "terminated"):
            state = container.get("state", {}).get(key)
            if state:
                return f"{key}: {state.get('reason')} {state.get('message', '')}".strip()
    conditions = [
        f"{c['type']}={c['status']} {c.get('message', '')}" for c in status.get("conditions", [])
    ]
    return f"phase {status.get('phase')}; {'; '.join(conditions)}"


def node_cpu_ns(node: str) -> int:
    """CPU time (ns) the node's cgroup root has used: every pod and cgroup under it."""
    return int((CPUACCT / f"nodeqos-{node}" / "cpuacct.usage").read_text())


def measure(
    server: Server,
    generator: Path,
    *,
    rate: int,
    seconds: float,
    workdir: Path,
    node_cpus: int,
) -> Sample:
    """vegeta at `rate` for `seconds` against the server; the node's CPU meanwhile as a
    share of its `node_cpus` cores."""
    marks = [(time.monotonic(), node_cpu_ns(server.node))]
    report = vegeta.attack(
        generator,
        server.url,
        rate=rate,
        seconds=seconds,
        workdir=workdir,
        sent=lambda: marks.append((time.monotonic(), node_cpu_ns(server.node))),
    )
    (started, before), (ended, after) = marks
    used, span = after - before, ended - started
    return Sample(
        rate=rate,
        requests=report.requests,
        errors=report.failed,
        p50_ms=round(report.p50_ms, 3),
        p99_ms=round(report.p99_ms, 3),
        p999_ms=round(report.p999_ms, 3),
        node_cpu_percent=round(100.0 * used / (span * 1e9 * node_cpus), 1),
    )
