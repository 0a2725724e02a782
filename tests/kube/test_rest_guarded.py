"""`Rest.guarded`: a view of the client that sends no write while its owner may not act."""

from __future__ import annotations

import pytest

from kube import rest

pytestmark = pytest.mark.controlplane


def test_a_guarded_client_refuses_writes_not_reads(kube: rest.Rest, namespace: str) -> None:
    """Writes are refused (WriteRefused, an ApiUnavailable) while may_write() is false; reads pass."""
    leading = [True]
    guarded = kube.guarded(lambda: leading[0], "not leading")
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    guarded.create(path, {"metadata": {"name": "sent"}})

    leading[0] = False
    with pytest.raises(rest.WriteRefused, match=r"POST .*configmaps: not leading"):
        guarded.create(path, {"metadata": {"name": "refused"}})
    with pytest.raises(rest.ApiUnavailable):
        guarded.delete(f"{path}/sent")
    names = [c["metadata"]["name"] for c in guarded.get(path)["items"]]
    assert "sent" in names
    assert "refused" not in names
    kube.delete(f"{path}/sent")  # the client it was made from is not guarded
