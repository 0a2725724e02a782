"""hack/peers/nullextender, the floor bench/extender.py measures nodeqos's extender
against: it must answer the protocol as kube-scheduler expects (every node passes,
every node scored alike), or the floor it reports means nothing."""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from extender import local
from testbed import controlplane

PEERS = Path(__file__).resolve().parents[2] / "hack" / "peers"


@pytest.fixture(scope="module")
def null_extender(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    if shutil.which("go") is None:
        pytest.fail("no Go toolchain on PATH: install Go >= 1.26 (it builds hack/peers)")
    binary = tmp_path_factory.mktemp("nullextender") / "nullextender"
    # Only this package, not the whole peers build: it needs the standard library alone.
    subprocess.run(["go", "build", "-o", str(binary), "./nullextender"], cwd=PEERS, check=True)
    port = controlplane.free_port()
    proc = subprocess.Popen([str(binary), "--listen", f"127.0.0.1:{port}"])
    try:
        assert local.wait_ready(port, timeout=20) == {"ready": True}
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def _post(port: int, verb: str, body: bytes, method: str = "POST") -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, f"/{verb}", body)
        reply = connection.getresponse()
        return reply.status, reply.read()
    finally:
        connection.close()


POD = {"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {"containers": []}}


def test_every_node_passes_the_filter(null_extender: int) -> None:
    body = json.dumps({"Pod": POD, "NodeNames": ["n1", "n2", "n3"]}).encode()
    status, answer = _post(null_extender, "filter", body)
    assert status == 200
    assert json.loads(answer) == {"NodeNames": ["n1", "n2", "n3"], "FailedNodes": {}, "Error": ""}


def test_every_node_is_scored_alike(null_extender: int) -> None:
    body = json.dumps({"Pod": POD, "NodeNames": ["n1", "n2"]}).encode()
    status, answer = _post(null_extender, "prioritize", body)
    assert status == 200
    assert json.loads(answer) == [{"Host": "n1", "Score": 0}, {"Host": "n2", "Score": 0}]


@pytest.mark.parametrize(
    ("method", "body", "status", "says"),
    [
        ("POST", b'{"Pod": {}}', 400, b"nodeCacheCapable"),
        ("POST", b"{not json", 400, b"bad ExtenderArgs"),
        ("GET", b"", 405, b"POST only"),
    ],
)
def test_what_it_cannot_answer_is_refused_saying_why(
    null_extender: int, method: str, body: bytes, status: int, says: bytes
) -> None:
    got, answer = _post(null_extender, "filter", body, method)
    assert got == status
    assert says in answer
