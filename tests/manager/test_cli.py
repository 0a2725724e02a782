"""`nodeqos-manager`: flag problems exit 2 listing each; `render` prints a node's specs;
the client's connection pool fits the daemon's watches and writers."""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from kube import rest
from manager import batchresource, cli, daemon, reconcile

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "manager"


def test_every_flag_problem_is_listed_and_exits_2() -> None:
    """Five bad flags: one run reports all five, each naming its flag."""
    result = CliRunner().invoke(
        cli.main,
        [
            "--config-namespace",
            "Not_A_Namespace",
            "--slo-config-name",
            "-bad-",
            "--metrics-addr",
            "nowhere",
            "--node-selector",
            "pool in",
            "--lease-duration",
            "1",
        ],
    )
    assert result.exit_code == 2
    assert "cannot start (5 problems)" in result.output
    for flag in (
        "--config-namespace:",
        "--slo-config-name:",
        "--metrics-addr:",
        "--node-selector:",
        "--lease-duration",
    ):
        assert flag in result.output


def test_render_prints_a_nodes_specs_from_koordinators_example() -> None:
    """`render` over Koordinator's chart ConfigMap: thresholds enabled, default collect policy."""
    result = CliRunner().invoke(
        cli.main,
        ["render", "--config", str(FIXTURES / "koordinator-chart-v1.8.0.yaml")],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["nodeslo"]["spec"]["resourceUsedThresholdWithBE"]["enable"] is True
    policy = out["nodemetric"]["spec"]["metricCollectPolicy"]
    assert policy["nodeAggregatePolicy"]["durations"] == ["5m0s", "10m0s", "30m0s"]


def test_render_lists_every_configmap_problem(tmp_path: Path) -> None:
    """Two broken keys: both are listed with their paths, exit 2."""
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(
        "data:\n"
        '  cpu-burst-config: \'{"clusterStrategy": {"policy": "sometimes"}}\'\n'
        "  system-config: '{'\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(cli.main, ["render", "--config", str(manifest)])
    assert result.exit_code == 2
    assert "invalid ConfigMap (2 problems)" in result.output
    assert "cpu-burst-config.clusterStrategy.policy: must be one of" in result.output
    assert "system-config: invalid JSON" in result.output


def test_webhook_flag_problems_are_listed() -> None:
    """A bad --webhook-addr and --webhook-service are both reported, exit 2."""
    result = CliRunner().invoke(
        cli.main, ["--webhook-addr", "nowhere", "--webhook-service", "svc-without-namespace"]
    )
    assert result.exit_code == 2
    assert "cannot start (2 problems)" in result.output
    assert "--webhook-addr:" in result.output and "--webhook-service:" in result.output


def test_the_client_pool_holds_every_watch_and_every_batch_worker() -> None:
    """POOL_SIZE covers the daemon's informers (one watch each) plus every writer thread;
    the three controllers' views share one informer per resource."""
    config = kubernetes.client.Configuration()
    config.host = "https://127.0.0.1:1"  # never dialled: nothing is started
    client = rest.Rest(kubernetes.client.ApiClient(config))
    built = daemon.build(daemon.Options(leader_elect=False), CollectorRegistry(), client=client)
    views = [
        *built.reconciler.informers(),
        *built.batch.informers(),
        *built.profiles.informers(),
    ]
    watches = built.informers.all()
    # discovery cannot reach this server: no policy informers (the first pass asks again)
    assert len(watches) == daemon.WATCHES - 4
    assert {id(view.shared) for view in views} == {id(shared) for shared in watches}
    names = sorted(shared.name for shared in watches)
    assert names.count("nodes") == 1 and names.count("slo-controller-config") == 1
    assert names.count("nodemetrics") == 1
    assert daemon.POOL_SIZE > daemon.WATCHES + batchresource.WORKERS + reconcile.WRITE_WORKERS


def test_profile_path_is_checked_with_the_webhook_it_needs() -> None:
    """--profile-path: one of auto, policy, webhook; webhook without --webhook-addr refused."""
    assert daemon.Options(profile_path="auto").validate() == []
    assert daemon.Options(profile_path="policy").validate() == []
    (problem,) = daemon.Options(profile_path="webhook").validate()
    assert problem.startswith("--profile-path: webhook needs --webhook-addr")
    (problem,) = daemon.Options(profile_path="both").validate()
    assert problem.startswith("--profile-path: must be one of auto, policy, webhook")
    assert daemon.Options(profile_path="webhook", webhook_addr="127.0.0.1:9443").validate() == []
