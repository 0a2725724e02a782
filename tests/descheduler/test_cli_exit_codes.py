"""`nodeqos-descheduler` refuses to start with status 2, listing every problem, before
touching the cluster: configuration, plugins, credentials, leader election, flags."""

from __future__ import annotations

import pathlib
import socket
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner, Result

from descheduler import cli

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures" / "descheduler"
HEAD = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"
# Credentials that load but lead nowhere: problems must show before any request.
UNREACHABLE_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


@pytest.fixture
def kubeconfig(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "kubeconfig"
    path.write_text(UNREACHABLE_KUBECONFIG)
    return path


def start(tmp_path: pathlib.Path, body: str, *flags: str) -> Result:
    config_file = tmp_path / "config.yaml"
    config_file.write_text(HEAD + textwrap.dedent(body))
    return CliRunner().invoke(cli.main, ["--config", str(config_file), *flags])


def test_invalid_configuration_exits_2_with_every_path() -> None:
    """The daemon path reports configuration problems like --validate does."""
    result = CliRunner().invoke(cli.main, ["--config", str(FIXTURES / "invalid.yaml"), "--once"])
    assert result.exit_code == 2
    assert result.stderr.startswith("invalid configuration (")
    assert "  profiles[0].pluginConfig[LowNodeLoad].args.lowThresholds.cpu:" in result.stderr


def test_unknown_plugin_exits_2_naming_the_known_ones(tmp_path: pathlib.Path) -> None:
    result = start(
        tmp_path,
        """\
        profiles:
        - name: p
          plugins: {balance: {enabled: [{name: LowNodeLoadd}]}}
        """,
    )
    assert result.exit_code == 2
    assert 'profiles[0].plugins.balance.enabled[0].name: unknown plugin "LowNodeLoadd"' in (
        result.stderr
    )
    assert "known plugins: CustomPriority, DefaultEvictor," in result.stderr


def test_reservation_first_job_mode_exits_2_in_a_real_process(tmp_path: pathlib.Path) -> None:
    """MigrationController with defaultJobMode ReservationFirst: status 2 saying why, no cluster needed."""
    config_file = tmp_path / "koord.yaml"
    config_file.write_text(
        textwrap.dedent("""\
            apiVersion: descheduler/v1alpha2
            kind: DeschedulerConfiguration
            profiles:
            - name: koord
              plugins:
                evict: {disabled: [{name: "*"}], enabled: [{name: MigrationController}]}
                filter: {disabled: [{name: "*"}], enabled: [{name: MigrationController}]}
              pluginConfig:
              - name: MigrationController
                args: {defaultJobMode: ReservationFirst}
            """)
    )
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "descheduler.cli",
            "--config",
            str(config_file),
            "--kubeconfig",
            str(tmp_path / "never-read"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 2, completed.stderr
    assert completed.stdout == ""
    assert "plugin MigrationController: defaultJobMode ReservationFirst needs" in completed.stderr


def test_unreadable_kubeconfig_exits_2(tmp_path: pathlib.Path) -> None:
    missing = tmp_path / "nope"
    result = start(tmp_path, "", "--kubeconfig", str(missing))
    assert result.exit_code == 2
    assert result.stderr.splitlines()[:2] == [
        "cannot start (1 problem):",
        f"  cannot load a kubeconfig from {missing}: "
        "Invalid kube-config file. No configuration found.",
    ]


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        pytest.param(
            "leaderElection: {leaseDuration: 2s, renewDeadline: 2s, retryPeriod: 1s}\n",
            "leader election needs leaseDuration > renewDeadline > retryPeriod > 0",
            id="timings",
        ),
        pytest.param(
            "leaderElection: {resourceLock: endpoints}\n",
            "leaderElection.resourceLock: 'endpoints' is not supported; use leases",
            id="lock",
        ),
    ],
)
def test_unusable_leader_election_exits_2(
    tmp_path: pathlib.Path, kubeconfig: pathlib.Path, body: str, problem: str
) -> None:
    result = start(tmp_path, body, "--kubeconfig", str(kubeconfig))
    assert result.exit_code == 2, result.output
    assert problem in result.stderr


def test_bad_metrics_address_exits_2(tmp_path: pathlib.Path, kubeconfig: pathlib.Path) -> None:
    result = start(tmp_path, "", "--kubeconfig", str(kubeconfig), "--metrics-addr", "nope")
    assert result.exit_code == 2
    assert "listen address: must be HOST:PORT" in result.stderr


def test_running_needs_a_config_file() -> None:
    result = CliRunner().invoke(cli.main, ["--once"])
    assert result.exit_code == 2
    assert "--config is required to run the descheduler" in result.stderr


def test_unknown_eviction_backend_is_a_usage_error(tmp_path: pathlib.Path) -> None:
    result = start(tmp_path, "", "--eviction-backend", "drain")
    assert result.exit_code == 2
    assert "'drain' is not one of 'eviction', 'delete'" in result.stderr


def test_validate_checks_only_the_file(tmp_path: pathlib.Path) -> None:
    """--validate needs no cluster and no credentials."""
    result = start(tmp_path, "dryRun: true\n", "--validate", "--kubeconfig", "/nonexistent")
    assert result.exit_code == 0, result.output
    assert result.stdout == "configuration OK\n"


def test_address_in_use_exits_2(tmp_path: pathlib.Path, kubeconfig: pathlib.Path) -> None:
    """A taken /metrics port is a start-up problem, reported before any cycle."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = start(
            tmp_path, "", "--kubeconfig", str(kubeconfig), "--metrics-addr", f"127.0.0.1:{port}"
        )
    assert result.exit_code == 2, result.output
    assert f"  cannot listen on 127.0.0.1:{port}: " in result.stderr


def test_unknown_feature_gate_exits_2_naming_the_known_ones(tmp_path: pathlib.Path) -> None:
    """--feature-gates takes upstream's gate names; a typo is a usage error naming them."""
    result = start(tmp_path, "", "--once", "--feature-gates", "EvictionsInBackgrund=true")
    assert result.exit_code == 2
    assert "unknown gate 'EvictionsInBackgrund'; known gates: EvictionsInBackground" in (
        result.stderr
    )
