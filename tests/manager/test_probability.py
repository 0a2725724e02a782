"""manager.probability: Koordinator's draw, the AdmissionReview answer, the configuration."""

from __future__ import annotations

import base64
import json
import os
import time
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


def test_a_hung_openssl_is_killed_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An openssl that never returns costs OPENSSL_TIMEOUT, then a RuntimeError naming it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    hung = bin_dir / "openssl"
    hung.write_text("#!/bin/sh\nexec sleep 60\n")
    hung.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(probability, "OPENSSL_TIMEOUT", 0.5)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="no answer in"):
        probability.make_certificate(tmp_path, ["127.0.0.1"])
    assert time.monotonic() - start < 5.0
