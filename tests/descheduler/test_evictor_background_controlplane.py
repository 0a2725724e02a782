"""Evictions in background (KEP-1397) against the real API server and a real admission webhook.

KubeVirt answers the eviction of a VM's launcher pod through a validating
webhook on `pods/eviction`: HTTP 429 "Eviction triggered evacuation ...", and
migrates the VM in its own time. Here a small HTTPS webhook (self-signed
certificate from `openssl`, scoped to the test's namespace) answers the same
way for pods annotated `request-evict-only`, and the descheduler's informers,
Eviction API backend and limits run unchanged with `EvictionsInBackground=true`.
"""

from __future__ import annotations

import base64
import http.server
import json
import pathlib
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from descheduler import config, evictions, features, framework
from descheduler.framework import Reason
from descheduler.framework import background as bg
from kube import events, rest
from tests.descheduler import fakes
from tests.descheduler import test_evictor_controlplane as cp
from tests.descheduler.test_evictor_controlplane import (
    LABEL,
    Cluster,
    Descheduler,
    RecordingRest,
    eventually,
    test_registry,
)

pytestmark = pytest.mark.controlplane

cluster = cp.cluster  # the fixture: nodes labelled for this test, deleted afterwards


class Webhook:
    """An HTTPS admission webhook denying evictions of annotated pods with KubeVirt's 429."""

    def __init__(self, directory: pathlib.Path, kube: rest.Rest, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.asked: list[str] = []
        self.annotations: list[dict[str, str]] = []  # of every Eviction the webhook saw
        key, cert = directory / "tls.key", directory / "tls.crt"
        subprocess.run(
            [
                *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
                *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
                *("-addext", "subjectAltName=IP:127.0.0.1"),
            ],
            check=True,
            capture_output=True,
        )
        self.ca_bundle = cert.read_bytes()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                body = json.dumps(hook.answer(review["request"])).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        name = request["name"]
        self.annotations.append(dict(request["object"]["metadata"].get("annotations") or {}))
        pod = self.kube.get(f"/api/v1/namespaces/{self.namespace}/pods/{name}")
        response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
        if bg.ANNOTATION_REQUEST_EVICT_ONLY in (pod["metadata"].get("annotations") or {}):
            self.asked.append(name)
            response["allowed"] = False
            response["status"] = {
                "code": 429,
                "reason": "TooManyRequests",
                "message": f"Eviction triggered evacuation of VMI {self.namespace}/{name}",
            }
        return {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": response,
        }

    @property
    def name(self) -> str:
        return f"{self.namespace}-evacuation"

    def install(self) -> None:
        self.thread.start()
        port = self.server.server_address[1]
        self.kube.create(
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            {
                "metadata": {"name": self.name},
                "webhooks": [
                    {
                        "name": "evacuation.nodeqos.test",
                        "clientConfig": {
                            "url": f"https://127.0.0.1:{port}/evict",
                            "caBundle": base64.b64encode(self.ca_bundle).decode(),
                        },
                        "rules": [
                            {
                                "operations": ["CREATE"],
                                "apiGroups": [""],
                                "apiVersions": ["v1"],
                                "resources": ["pods/eviction"],
                            }
                        ],
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": self.namespace}
                        },
                        "failurePolicy": "Fail",
                        "sideEffects": "None",
                        "admissionReviewVersions": ["v1"],
                        "timeoutSeconds": 10,
                    }
                ],
            },
        )

    def remove(self) -> None:
        self.kube.delete(
            f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{self.name}"
        )
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook(kube: rest.Rest, namespace: str, tmp_path: pathlib.Path) -> Iterator[Webhook]:
    hook = Webhook(tmp_path, kube, namespace)
    hook.install()
    yield hook
    hook.remove()


def build(kube: rest.Rest, namespace: str, **top: Any) -> tuple[Descheduler, Callable[[], None]]:
    client = RecordingRest(kube)
    raw = fakes.policy(balance=["HottestFirst"], nodeSelector=f"{LABEL}={namespace}", **top)
    registry = test_registry()
    cfg = config.decode_configuration(raw, plugins=registry.catalog())
    source = framework.InformerSource(client).start()
    assert source.wait_synced(15)
    metrics = CollectorRegistry()
    backend = evictions.EvictionAPI(client, events.Recorder(client, evictions.COMPONENT))
    runner = framework.Runner.from_config(
        cfg,
        registry,
        source=source,
        backend=backend,
        metrics=framework.Metrics(metrics),
        gates=features.Gates.parse("EvictionsInBackground=true"),
    )
    return Descheduler(client, source, runner, metrics), source.stop


def annotate(kube: rest.Rest, namespace: str, name: str, annotations: dict[str, str]) -> None:
    kube.patch(
        f"/api/v1/namespaces/{namespace}/pods/{name}", {"metadata": {"annotations": annotations}}
    )


def test_request_in_progress_holds_the_node_cap_until_the_pod_is_gone(
    kube: rest.Rest,
    namespace: str,
    cluster: Cluster,
    webhook: Webhook,
) -> None:
    """Cap 1 per node: the VM's evacuation holds node a's slot across cycles until it is deleted."""
    cluster.add_node("a")
    cluster.add_node("b")
    cluster.run_pod("vm", "a", cpu="900m", owner="virt")
    annotate(kube, namespace, "vm", {bg.ANNOTATION_REQUEST_EVICT_ONLY: ""})
    cluster.run_pod("web", "a", cpu="100m", owner="rs")
    d, stop = build(kube, namespace, maxNoOfPodsToEvictPerNode=1)
    try:
        eventually(
            lambda: any(bg.requests_background(p) for p in d.source.state().pods),
            "the informer sees the annotation",
        )

        first = d.runner.run_once()
        assert first.evicted_pods == [f"{namespace}/vm"]
        assert first.evictions[0].background
        assert webhook.asked == ["vm"]
        assert webhook.annotations[0] == {
            "reason": f"triggered by p1/HottestFirst: {cluster.node('a')} is hot",
            "requested-by": "nodeqos-descheduler",
        }
        assert [(s.pod, s.reason_code) for s in first.skipped] == [
            (f"{namespace}/web", Reason.LIMIT_REACHED)
        ]
        assert cluster.pod("vm")["metadata"].get("deletionTimestamp") is None

        # KubeVirt marks the evacuation under way; the next cycle does not ask again.
        annotate(kube, namespace, "vm", {bg.ANNOTATION_EVICTION_IN_PROGRESS: ""})
        eventually(
            lambda: any(bg.in_progress(p) for p in d.source.state().pods if p.name == "vm"),
            "the informer sees the evacuation in progress",
        )
        second = d.runner.run_once()
        assert webhook.asked == ["vm"]
        assert second.evicted_pods == []
        assert (f"{namespace}/vm", Reason.IN_BACKGROUND) in [
            (s.pod, s.reason_code) for s in second.skipped
        ]
        assert (f"{namespace}/web", Reason.LIMIT_REACHED) in [
            (s.pod, s.reason_code) for s in second.skipped
        ]

        # The VM has moved: its pod is deleted; the slot is free again.
        kube.delete(f"/api/v1/namespaces/{namespace}/pods/vm", {"gracePeriodSeconds": 0})
        eventually(
            lambda: all(p.name != "vm" for p in d.source.state().pods), "the informer sees it gone"
        )
        third = d.runner.run_once()
        assert third.evicted_pods == [f"{namespace}/web"]
        labels = {"strategy": "HottestFirst", "profile": "p1", "namespace": namespace}
        node = cluster.node("a")
        assert (
            d.sample(
                "nodeqos_descheduler_pods_evicted_total", result="background", node=node, **labels
            )
            == 1
        )
        assert (
            d.sample(
                "nodeqos_descheduler_pods_evicted_total", result="success", node=node, **labels
            )
            == 2
        )
    finally:
        stop()
