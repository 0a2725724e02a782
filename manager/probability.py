"""The one part of a ClusterColocationProfile CEL cannot decide: `probability` between 1% and
99%. Served by nodeqos-manager as a small mutating webhook; imports `kube` only.

Koordinator draws `rand.Intn(100)` per pod and skips the profile when the draw is greater
than the percentage (`shouldSkipProfile` in
`pkg/webhook/pod/mutating/cluster_colocation_profile.go`), so a profile of p% applies when
the draw is in 0..p, i.e. with probability (p+1)/100; nodeqos draws the same way.

The webhook only records the draw: it answers with a JSONPatch setting the pod annotation
`colocation.nodeqos.io/<profile>` to `apply` or `skip`. The profile's
MutatingAdmissionPolicy matches only pods whose annotation says `apply`. The API server runs
MutatingAdmissionPolicies *before* mutating webhooks (`AllOrderedPlugins` in
`pkg/kubeapiserver/options/plugins.go`: MutatingAdmissionPolicy, then
MutatingAdmissionWebhook), so the policy is rendered with `reinvocationPolicy: IfNeeded`:
the webhook's change makes the API server run the policies once more, and then it matches.
The webhook configuration has `failurePolicy: Ignore` and a short timeout: a manager outage
leaves the annotation unset, so the profile does not apply, and the pod is created.

The serving certificate is made in-process with `cryptography` (no subprocess to hang; ECDSA
P-256 keys, a cheap TLS handshake; a throwaway CA whose key is never written and a leaf for
the Service's DNS names and 127.0.0.1, both valid CERT_DAYS) by the first replica to start, and kept in the Secret
`nodeqos-manager-webhook` so every replica behind the Service serves the same one; the CA
goes into the configuration's `caBundle`. Delete the Secret to have a new one made.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import logging
import random
import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kube import endpoint, rest

log = logging.getLogger("manager.probability")

ANNOTATION_PREFIX = "colocation.nodeqos.io/"
CONFIGURATION = "nodeqos-colocation-probability"
PATH_PREFIX = "/probability/"
PROFILES_PATH = "/profiles"  # manager.profilemutation's webhook, on this server


def annotation(profile: str) -> str:
    return ANNOTATION_PREFIX + profile


def applies(percent: int, draw: int) -> bool:
    """Koordinator's decision for one pod: `draw` is uniform in 0..99."""
    return percent == 100 or (percent != 0 and draw <= percent)


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def review_response(
    review: Mapping[str, Any],
    profile: str,
    percent: int | None,
    draw: Callable[[], int],
    record: Callable[[str], None] = lambda _decision: None,
) -> dict[str, Any]:
    """The AdmissionReview answer for one pod and one profile: always allowed; a JSONPatch
    records the draw unless the profile is unknown or the pod already has its decision.
    `record` gets "apply", "skip", "unknown-profile" or "already-decided"."""
    request = review.get("request") or {}
    response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": True}
    pod = request.get("object") or {}
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    key = annotation(profile)
    if percent is None:
        record("unknown-profile")
    elif key in annotations:
        record("already-decided")
    else:
        value = "apply" if applies(percent, draw()) else "skip"
        record(value)
        if annotations:
            op: dict[str, Any] = {
                "op": "add",
                "path": "/metadata/annotations/" + _pointer(key),
                "value": value,
            }
        else:
            op = {"op": "add", "path": "/metadata/annotations", "value": {key: value}}
        response["patchType"] = "JSONPatch"
        response["patch"] = _b64(json.dumps([op]))
    return {
        "apiVersion": review.get("apiVersion", "admission.k8s.io/v1"),
        "kind": "AdmissionReview",
        "response": response,
    }


def _b64(text: str) -> str:
    import base64

    return base64.b64encode(text.encode()).decode()


@dataclass(frozen=True, slots=True)
class Certificate:
    cert: Path
    key: Path
    ca_pem: bytes


CERT_DAYS = 3650  # the Secret is the rotation: delete it and restart the managers


def make_certificate(directory: Path, hosts: list[str]) -> Certificate:
    """A throwaway CA and a server certificate for `hosts` (DNS names, or IPs), in-process.

    Writes ca.crt, tls.crt and tls.key (0600) into `directory`; the CA's key only
    signs the leaf and is dropped (nothing else is ever signed with it).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.UTC)
    until = now + dt.timedelta(days=CERT_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    signs_certificates = x509.KeyUsage(
        digital_signature=True, content_commitment=False, key_encipherment=False,
        data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
        encipher_only=False, decipher_only=False,
    )  # fmt: skip
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "nodeqos-manager-webhook-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))  # a node whose clock lags a little
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(signs_certificates, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    ca_file, cert_file, key_file = (directory / n for n in ("ca.crt", "tls.crt", "tls.key"))
    ca_file.write_bytes(ca.public_bytes(pem))
    cert_file.write_bytes(leaf.public_bytes(pem))
    key_file.touch(mode=0o600)
    key_file.chmod(0o600)  # made before by another call: the mode is ours all the same
    key_file.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return Certificate(cert=cert_file, key=key_file, ca_pem=ca_file.read_bytes())


SECRET = "nodeqos-manager-webhook"


def shared_certificate(
    client: rest.Rest, namespace: str, directory: Path, hosts: list[str]
) -> Certificate:
    """The certificate in Secret `namespace/SECRET`, made and stored first if missing (a
    replica that loses the race to create it takes the winner's)."""
    import base64

    path = f"/api/v1/namespaces/{namespace}/secrets"
    try:
        secret = client.get(f"{path}/{SECRET}")
    except rest.ApiError as err:
        if not err.not_found:
            raise
        made = make_certificate(directory, hosts)
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": SECRET, "namespace": namespace},
            "type": "kubernetes.io/tls",
            "data": {
                name: base64.b64encode(file.read_bytes()).decode()
                for name, file in (
                    ("ca.crt", directory / "ca.crt"),
                    ("tls.crt", made.cert),
                    ("tls.key", made.key),
                )
            },
        }
        try:
            client.create(path, body)
            return made
        except rest.ApiError as conflict:
            if conflict.status != 409:
                raise
            secret = client.get(f"{path}/{SECRET}")
    data = secret.get("data") or {}
    files = {}
    for name in ("ca.crt", "tls.crt", "tls.key"):
        files[name] = directory / f"shared-{name}"
        files[name].write_bytes(base64.b64decode(data.get(name, "")))
    return Certificate(
        cert=files["tls.crt"], key=files["tls.key"], ca_pem=files["ca.crt"].read_bytes()
    )


MAX_REVIEW = 8 * 1024 * 1024  # an AdmissionReview carries one Pod (etcd holds at most 1.5 MiB)
LIMITS = endpoint.Limits(max_body=MAX_REVIEW)


class Server:
    """The HTTPS webhook server, on `kube.endpoint` (its limits and timeouts) over TLS.

    `percent_of(profile)` gives a profile's percentage from the controller's cache (None
    when unknown: the pod is let through untouched). The port is bound at once (see
    `port`); requests are served from `start()` to `stop()`."""

    def __init__(
        self,
        address: tuple[str, int],
        percent_of: Callable[[str], int | None],
        certificate: Certificate,
        *,
        draw: Callable[[], int] = lambda: random.randrange(100),
        record: Callable[[str], None] = lambda _decision: None,
        limits: endpoint.Limits = LIMITS,
        profiles: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.certificate = certificate
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.load_cert_chain(self.certificate.cert, self.certificate.key)
        self._routes: dict[str, endpoint.PrefixRoute] = {
            PATH_PREFIX: _route(percent_of, draw, record)
        }
        if profiles is not None:
            # The webhook path of the profiles themselves (`manager.profilemutation`):
            # `profiles` answers one AdmissionReview.
            self._routes[PROFILES_PATH] = _review_route(profiles)
        self._limits = limits
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self._socket: socket.socket | None = socket.create_server(address, family=family)
        self._port = int(self._socket.getsockname()[1])
        self._endpoint: endpoint.Endpoint | None = None

    @property
    def port(self) -> int:
        return self._port

    def start(self) -> None:
        if self._socket is None:
            raise RuntimeError("the webhook server was stopped")
        self._endpoint = endpoint.Endpoint(
            self._socket,
            None,
            name="probability-webhook",
            prefix_routes=self._routes,
            tls=self._context,
            limits=self._limits,
        )

    def stop(self) -> None:
        if self._endpoint is not None:
            self._endpoint.close()
            self._endpoint = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None


def _route(
    percent_of: Callable[[str], int | None],
    draw: Callable[[], int],
    record: Callable[[str], None],
) -> endpoint.PrefixRoute:
    def review(profile: str, body: bytes) -> tuple[int, bytes]:
        try:
            decoded = json.loads(body or b"{}")
        except ValueError as err:  # JSONDecodeError and UnicodeDecodeError alike
            return 400, json.dumps({"error": f"bad AdmissionReview: {err}"}).encode()
        if not isinstance(decoded, dict) or not profile or "/" in profile:
            return 400, json.dumps(
                {"error": "expected an AdmissionReview for one profile"}
            ).encode()
        answer = review_response(decoded, profile, percent_of(profile), draw, record)
        return 200, json.dumps(answer).encode()

    return review


def _review_route(answer: Callable[[dict[str, Any]], dict[str, Any]]) -> endpoint.PrefixRoute:
    def review(rest_of_path: str, body: bytes) -> tuple[int, bytes]:
        if rest_of_path:
            return 404, json.dumps({"error": "not found"}).encode()
        try:
            decoded = json.loads(body or b"{}")
        except ValueError as err:
            return 400, json.dumps({"error": f"bad AdmissionReview: {err}"}).encode()
        if not isinstance(decoded, dict):
            return 400, json.dumps({"error": "expected an AdmissionReview"}).encode()
        return 200, json.dumps(answer(decoded)).encode()

    return review


@dataclass(frozen=True, slots=True)
class Entry:
    """A profile the webhook draws for, and the pods it is asked about."""

    profile: str
    namespace_selector: Mapping[str, Any] | None
    selector: Mapping[str, Any] | None


def configuration(
    entries: list[Entry], client_config: Mapping[str, Any], ca_pem: bytes
) -> dict[str, Any]:
    """The MutatingWebhookConfiguration: one webhook per profile, scoped by its selectors
    and to pods not yet decided, `failurePolicy: Ignore`, 3 s timeout.

    `client_config` is `{"service": {namespace, name, port}}` or `{"url": "https://..."}`;
    the profile's path is added to it."""
    import base64

    webhooks = []
    for entry in sorted(entries, key=lambda e: e.profile):
        client = {k: dict(v) if isinstance(v, Mapping) else v for k, v in client_config.items()}
        path = PATH_PREFIX + entry.profile
        if "service" in client:
            client["service"]["path"] = path
        else:
            client["url"] = str(client["url"]).rstrip("/") + path
        client["caBundle"] = base64.b64encode(ca_pem).decode()
        key = json.dumps(annotation(entry.profile))
        webhook: dict[str, Any] = {
            "name": f"{entry.profile}.probability.colocation.nodeqos.io",
            "clientConfig": client,
            "rules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE"],
                    "resources": ["pods"],
                    "scope": "Namespaced",
                }
            ],
            "matchConditions": [
                {
                    "name": "undecided",
                    "expression": f"!has(object.metadata.annotations) || !({key} in object.metadata.annotations)",
                }
            ],
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "timeoutSeconds": 3,
            "admissionReviewVersions": ["v1"],
            "reinvocationPolicy": "Never",
        }
        if entry.namespace_selector is not None:
            webhook["namespaceSelector"] = dict(entry.namespace_selector)
        if entry.selector is not None:
            webhook["objectSelector"] = dict(entry.selector)
        webhooks.append(webhook)
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {
            "name": CONFIGURATION,
            "labels": {"app.kubernetes.io/managed-by": "nodeqos-manager"},
        },
        "webhooks": webhooks,
    }


def unreachable(
    client_config: Mapping[str, Any], ca_pem: bytes, path: str, timeout: float = 3.0
) -> str | None:
    """Why the webhook at `client_config` + `path` does not answer an empty AdmissionReview
    as the API server would reach it (its CA, its Service's DNS name), or None if it does.
    Bounded by `timeout` (the configuration's timeoutSeconds)."""
    import urllib.error
    import urllib.request

    if "url" in client_config:
        url = str(client_config["url"]).rstrip("/") + path
    else:
        service = client_config["service"]
        url = (
            f"https://{service['name']}.{service['namespace']}.svc:{service.get('port', 443)}{path}"
        )
    context = ssl.create_default_context(cadata=ca_pem.decode())
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}
    request = urllib.request.Request(
        url, data=json.dumps(review).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as resp:
            answer = json.loads(resp.read(MAX_REVIEW))
    except (OSError, ValueError) as err:  # URLError, timeouts, TLS and JSON errors alike
        return f"{url}: {err}"
    if not (answer.get("response") or {}).get("allowed"):
        return f"{url}: not an AdmissionReview answer"
    return None
