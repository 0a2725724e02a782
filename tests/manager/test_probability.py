"""manager.probability: Koordinator's draw, the AdmissionReview answer, the configuration."""

from __future__ import annotations

import base64
import json
import ssl
from pathlib import Path
from typing import Any

import pytest

from manager import probability


@pytest.mark.parametrize(
    ("percent", "draw", "applies"),
    [
        pytest.param(50, 50, True, id="draw-equal-applies"),
        pytest.param(50, 51, False, id="draw-above-skips"),
        pytest.param(0, 0, False, id="zero-never"),
        pytest.param(100, 99, True, id="hundred-always"),
        pytest.param(1, 0, True, id="one-percent-low-draw"),
    ],
)
def test_draw_follows_koordinator(percent: int, draw: int, applies: bool) -> None:
    """Skipped when rand.Intn(100) > percent, as Koordinator's shouldSkipProfile."""
    assert probability.applies(percent, draw) is applies


def _review(annotations: dict[str, str] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u1", "object": {"metadata": meta}},
    }


def _patch(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return list(json.loads(base64.b64decode(answer["response"]["patch"])))


def test_the_draw_is_recorded_as_an_annotation() -> None:
    """No annotations: the map is added; some: the key is added (its '/' escaped)."""
    answer = probability.review_response(_review(None), "prof", 40, lambda: 10)
    assert answer["response"]["uid"] == "u1" and answer["response"]["allowed"] is True
    assert _patch(answer) == [
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {"colocation.nodeqos.io/prof": "apply"},
        }
    ]
    answer = probability.review_response(_review({"x": "y"}), "prof", 40, lambda: 90)
    assert _patch(answer) == [
        {"op": "add", "path": "/metadata/annotations/colocation.nodeqos.io~1prof", "value": "skip"}
    ]


@pytest.mark.parametrize(
    ("annotations", "percent"),
    [
        pytest.param({"colocation.nodeqos.io/prof": "skip"}, 40, id="already-decided"),
        pytest.param(None, None, id="unknown-profile"),
    ],
)
def test_nothing_to_draw_is_allowed_untouched(
    annotations: dict[str, str] | None, percent: int | None
) -> None:
    """A decided pod or an unknown profile: allowed, no patch, no draw."""
    seen: list[str] = []
    answer = probability.review_response(
        _review(annotations), "prof", percent, lambda: 1 // 0, seen.append
    )
    assert answer["response"] == {"uid": "u1", "allowed": True}
    assert seen == ["already-decided" if percent else "unknown-profile"]


def test_configuration_is_scoped_and_never_blocks() -> None:
    """One webhook per profile: its selectors, undecided pods only, Ignore, short timeout."""
    config = probability.configuration(
        [probability.Entry("prof", {"matchLabels": {"ns": "a"}}, {"matchLabels": {"app": "x"}})],
        {"service": {"namespace": "nodeqos-system", "name": "nodeqos-manager", "port": 443}},
        b"CA",
    )
    (webhook,) = config["webhooks"]
    assert webhook["clientConfig"]["service"]["path"] == "/probability/prof"
    assert webhook["clientConfig"]["caBundle"] == base64.b64encode(b"CA").decode()
    assert webhook["namespaceSelector"] == {"matchLabels": {"ns": "a"}}
    assert webhook["objectSelector"] == {"matchLabels": {"app": "x"}}
    assert webhook["failurePolicy"] == "Ignore" and webhook["timeoutSeconds"] <= 5
    assert "colocation.nodeqos.io/prof" in webhook["matchConditions"][0]["expression"]


def test_the_certificate_is_made_in_process_as_before(tmp_path: Path) -> None:
    """ECDSA P-256 keys, the hosts as DNS and IP SANs, serverAuth, ten years, signed by the CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    made = probability.make_certificate(tmp_path, ["webhook.nodeqos-system.svc", "127.0.0.1"])
    leaf = x509.load_pem_x509_certificate(made.cert.read_bytes())
    ca = x509.load_pem_x509_certificate(made.ca_pem)
    key = serialization.load_pem_private_key(made.key.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp256r1"
    assert key.public_key() == leaf.public_key()
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["webhook.nodeqos-system.svc"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    usage = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]
    assert leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    days = (leaf.not_valid_after_utc - leaf.not_valid_before_utc).days
    assert days == probability.CERT_DAYS
    leaf.verify_directly_issued_by(ca)
    assert made.key.stat().st_mode & 0o077 == 0
    assert not (tmp_path / "ca.key").exists()  # the CA signs this one leaf and is gone
    # what the webhook server does with them: a TLS context verifying against the CA
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(made.cert, made.key)
    ssl.create_default_context(cadata=made.ca_pem.decode())
