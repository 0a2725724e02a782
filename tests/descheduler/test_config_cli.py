"""`nodeqos-descheduler --config` and `--write-config-to` (scenario D10: exit status 2)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import click
from click.testing import CliRunner

from descheduler import cli, config
from descheduler.plugins import in_tree

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures" / "descheduler"
INVALID_PATHS = (
    "deschedulingInterval:",
    "colour:",
    "profiles[0].plugins.balance.enabled[1].name:",
    "profiles[0].pluginConfig[LowNodeLoad].args.lowThresholds.cpu:",
    "profiles[0].pluginConfig[LowNodeLoad].args.nodePools[0].highThresholds.memory:",
)


def test_valid_file_is_reported_ok() -> None:
    """A Koordinator user's file validates (--validate) and exits 0."""
    result = CliRunner().invoke(
        cli.main, ["--config", str(FIXTURES / "koordinator-lownodeload.yaml"), "--validate"]
    )
    assert result.exit_code == 0, result.output
    assert result.output == "configuration OK\n"


def test_invalid_file_lists_every_problem_and_exits_2() -> None:
    """Every problem goes to stderr with its path; the exit status is 2."""
    result = CliRunner().invoke(cli.main, ["--config", str(FIXTURES / "invalid.yaml")])
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0] == f"invalid configuration ({len(lines) - 1} problems):"
    for path in INVALID_PATHS:
        assert any(line.strip().startswith(path) for line in lines[1:]), (path, lines)


def test_missing_file_exits_2(tmp_path: pathlib.Path) -> None:
    """A missing --config file is a clear error with status 2."""
    missing = tmp_path / "nope.yaml"
    result = CliRunner().invoke(cli.main, ["--config", str(missing)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "invalid configuration (1 problem):",
        f"  {missing}: no such file",
    ]


def test_yaml_syntax_error_exits_2_with_line_and_column(tmp_path: pathlib.Path) -> None:
    """Bad YAML is one error naming the file, line and column."""
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: descheduler/v1alpha2\nkind: [DeschedulerConfiguration\n")
    result = CliRunner().invoke(cli.main, ["--config", str(broken)])
    assert result.exit_code == 2
    assert f"{broken}: line 3, column 1:" in result.stderr


def test_write_config_to_writes_a_file_that_loads_equal(tmp_path: pathlib.Path) -> None:
    """--write-config-to writes the fully defaulted configuration; it loads back equal."""
    source = FIXTURES / "upstream-policy.yaml"
    target = tmp_path / "written.yaml"
    result = CliRunner().invoke(
        cli.main, ["--config", str(source), "--write-config-to", str(target)]
    )
    assert result.exit_code == 0, result.output
    assert config.load_config(target, plugins=in_tree()) == config.load_config(
        source, plugins=in_tree()
    )


def test_write_config_to_stdout_without_config_writes_defaults() -> None:
    """With no --config, the defaults are written ('-' is stdout)."""
    result = CliRunner().invoke(cli.main, ["--write-config-to", "-"])
    assert result.exit_code == 0
    assert config.load_config(result.stdout, plugins=in_tree()) == config.default_configuration(
        plugins=in_tree()
    )


def test_subcommands_receive_the_loaded_configuration() -> None:
    """A subcommand (simulate) finds the loaded configuration and the plugins in the click context."""
    seen: list[object] = []

    @click.command("probe")
    @click.pass_obj
    def probe(obj: object) -> None:
        seen.append(obj)

    cli.main.add_command(probe)
    try:
        result = CliRunner().invoke(
            cli.main, ["--config", str(FIXTURES / "koordinator-lownodeload.yaml"), "probe"]
        )
    finally:
        cli.main.commands.pop("probe")
    assert result.exit_code == 0, result.output
    assert "configuration OK" not in result.output
    (session,) = seen
    assert isinstance(session, cli.Session)
    assert isinstance(session.config, config.DeschedulerConfiguration)
    assert "LowNodeLoad" in session.registry


def test_real_process_exits_2_and_lists_paths() -> None:
    """`python -m descheduler.cli` in a real process: status 2, every path on stderr."""
    completed = subprocess.run(
        [sys.executable, "-m", "descheduler.cli", "--config", str(FIXTURES / "invalid.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 2, completed.stderr
    assert completed.stdout == ""
    for path in INVALID_PATHS:
        assert f"  {path}" in completed.stderr


def test_commands_without_a_cluster_never_import_the_kubernetes_package() -> None:
    """--validate and simulate in a real process leave `kubernetes` unimported (issue #37:
    about 0.3 s of CPU at every start that only loading credentials needs)."""
    code = (
        "import sys\n"
        "from descheduler import cli\n"
        "for argv in sys.argv[1:]:\n"
        "    try:\n"
        "        cli.run(argv.split())\n"
        "    except SystemExit as done:\n"
        "        assert done.code == 0, (argv, done.code)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes'))\n"
    )
    config_file = FIXTURES / "koordinator-lownodeload.yaml"
    snapshot = FIXTURES / "snapshot-lownodeload.yaml"
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            f"--config {config_file} --validate",
            f"simulate --config {config_file} --snapshot {snapshot} --now 2024-05-01T12:00:00Z",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines()[-1] == "[]"
