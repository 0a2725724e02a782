"""`simulate` refuses unusable input clearly, with exit status 2."""

from __future__ import annotations

import pathlib

import pytest
from click.testing import CliRunner, Result

from descheduler import cli

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures" / "descheduler"
SNAPSHOT = FIXTURES / "snapshot-lownodeload.yaml"
CONFIG = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"
NODE = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status:
  allocatable: {cpu: "4", memory: 16Gi}
  conditions: [{type: Ready, status: "True"}]
"""


@pytest.fixture
def config_file(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    return path


def run(config_file: pathlib.Path, snapshot: pathlib.Path, *extra: str) -> Result:
    return CliRunner().invoke(
        cli.main,
        ["simulate", "--config", str(config_file), "--snapshot", str(snapshot), *extra],
    )


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        pytest.param(
            "kind: List\nitems: [\n", "line 3, column 1: expected the node content", id="bad-yaml"
        ),
        pytest.param("- just\n- a list\n", "must be a Kubernetes object or a List", id="a-list"),
        pytest.param(
            "apiVersion: v1\nkind: List\nitems: []\n",
            "holds no Node; a snapshot needs the cluster's Nodes",
            id="no-nodes",
        ),
        pytest.param(
            "kind: List\nitems:\n- metadata: {name: x}\n", "items[0]: has no kind", id="no-kind"
        ),
        pytest.param(
            NODE + "---\nkind: Pod\nmetadata: {name: p, namespace: ns}\nspec: 5\n",
            "document 2 (Pod ns/p): cannot read it: AttributeError",
            id="bad-pod",
        ),
        pytest.param(
            "kind: List\nitems:\n- kind: Node\n  metadata: {name: n1}\n"
            "  status: {allocatable: {cpu: lots}}\n",
            "items[0] (Node n1): cannot read it: ValueError: invalid resource list",
            id="bad-quantity",
        ),
    ],
)
def test_bad_snapshot_exits_2_saying_what_is_wrong(
    tmp_path: pathlib.Path, config_file: pathlib.Path, content: str, problem: str
) -> None:
    """Every problem names the file and the object; nothing is printed on stdout."""
    snapshot = tmp_path / "snap.yaml"
    snapshot.write_text(content)
    result = run(config_file, snapshot)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("unusable snapshot (1 problem):\n")
    assert f"  {snapshot}" in result.stderr
    assert problem in result.stderr


def test_missing_snapshot_exits_2(tmp_path: pathlib.Path, config_file: pathlib.Path) -> None:
    missing = tmp_path / "nope.yaml"
    result = run(config_file, missing)
    assert result.exit_code == 2
    assert f"  {missing}: no such file" in result.stderr


def test_several_documents_and_single_objects_load(
    tmp_path: pathlib.Path, config_file: pathlib.Path
) -> None:
    """`kubectl get` outputs joined with ---: single objects and Lists alike."""
    snapshot = tmp_path / "snap.yaml"
    snapshot.write_text(NODE + "---\n" + NODE.replace("n1", "n2"))
    result = run(config_file, snapshot, "-o", "json")
    assert result.exit_code == 0, result.output
    assert '"too_few_nodes"' not in result.stdout  # two Ready nodes


@pytest.mark.parametrize(
    ("now", "message"),
    [
        pytest.param("yesterday", "not an RFC 3339 time", id="garbage"),
        pytest.param("2024-05-01T12:00:00", "needs a time zone", id="naive"),
    ],
)
def test_bad_now_exits_2(config_file: pathlib.Path, now: str, message: str) -> None:
    result = run(config_file, SNAPSHOT, "--now", now)
    assert result.exit_code == 2
    assert message in result.stderr


def test_simulate_without_a_config_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli.main, ["simulate", "--snapshot", str(SNAPSHOT)])
    assert result.exit_code == 2
    assert "simulate needs --config" in result.stderr
