"""`nodeqos-agent` carries the QoS plugins' flags and `--qos-extension-plugins`, and applies them."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import qosmanager
from agent import cli
from cgroups import CgroupVersion, Driver
from kube import rest
from testbed import controlplane
from tests.agent.builders import scenario_a_pods
from tests.agent.clusterkit import cleanup_cluster_objects
from tests.cgroupfs_builder import write_meminfo, write_pod_tree, write_proc_stat
from tests.qosmanager import example_plugin


class Extras:
    """A `registry_extras` hook that keeps the registry it extended, for the test to inspect."""

    registry: qosmanager.PluginRegistry
    counter: example_plugin.BEPodCounter

    def __call__(self, registry: qosmanager.PluginRegistry) -> None:
        self.registry = registry
        self.counter = example_plugin.register(registry)


def test_help_lists_builtin_plugin_flags_and_extension_gates() -> None:
    """The stock command's --help shows every built-in's flags and --qos-extension-plugins."""
    result = CliRunner().invoke(cli.build_command(), ["--help"])
    assert result.exit_code == 0, result.output
    for flag in (
        "--reconcile-interval-seconds",  # CPUBurst
        "--cpu-suppress-interval-seconds",
        "--memory-evict-cool-time-seconds",
        "--qos-extension-plugins",
    ):
        assert flag in result.output
    assert "--be-pod-counter-interval" not in result.output


def test_registry_extras_add_an_out_of_tree_plugin_and_its_flags() -> None:
    """build_command(extras) shows the extension plugin's flag and lists it as a known gate."""
    result = CliRunner().invoke(cli.build_command(Extras()), ["--help"])
    assert result.exit_code == 0, result.output
    assert "--be-pod-counter-interval" in result.output
    assert "known: BEPodCounter" in result.output


def test_unknown_extension_plugin_exits_2_naming_the_known_ones() -> None:
    """--qos-extension-plugins=Nope=true is a usage error listing the registered plugins."""
    result = CliRunner().invoke(
        cli.build_command(Extras()), ["--standalone", "--qos-extension-plugins=Nope=true"]
    )
    assert result.exit_code == 2, result.output
    assert "unknown feature gate 'Nope'; known gates: BEPodCounter" in result.output


def test_each_command_has_its_own_registry() -> None:
    """Parsing one command's flags leaves another command's plugins at their defaults."""
    first, second = Extras(), Extras()
    cli.build_command(first).make_context("nodeqos-agent", ["--reconcile-interval-seconds", "7"])
    cli.build_command(second)
    assert _builtin(first.registry, "CPUBurst").interval == 7.0
    assert _builtin(second.registry, "CPUBurst").interval == 1.0


@pytest.mark.controlplane
def test_flags_reach_the_plugins_the_agent_runs(
    tmp_path: Path, control_plane: controlplane.ControlPlane, kube: rest.Rest
) -> None:
    """In-cluster, the parsed flags configure the running plugins; the gate enables the extension."""
    tree = write_pod_tree(tmp_path / "cgroup", CgroupVersion.V2, Driver.SYSTEMD, scenario_a_pods())
    proc = tmp_path / "proc"
    write_proc_stat(proc, user=1000, system=500, idle=9000)
    write_meminfo(proc, total_kb=16 * 1024 * 1024, available_kb=12 * 1024 * 1024)
    node = "cli-plugin-flags"
    extras = Extras()
    try:
        result = CliRunner().invoke(
            cli.build_command(extras),
            [
                *("--node-name", node, "--kubeconfig", str(control_plane.kubeconfig)),
                *("--cgroup-root", str(tree.root), "--proc-root", str(proc)),
                *("--metric-cache-path", str(tmp_path / "cache.db"), "--metrics-addr", ""),
                *("--run-for", "3s", "--reconcile-interval-seconds", "7"),
                *(
                    "--qos-extension-plugins",
                    "BEPodCounter=true",
                    "--be-pod-counter-interval",
                    "0.2",
                ),
            ],
        )
    finally:
        cleanup_cluster_objects(kube, node)
    assert result.exit_code == 0, result.output
    burst = _builtin(extras.registry, "CPUBurst")
    assert burst.interval == 7.0
    assert burst.handle.fs.root == tree.root  # bound after parsing, to --cgroup-root
    assert extras.counter.interval == 0.2
    assert extras.counter.counts, "BEPodCounter never ran"


def _builtin(registry: qosmanager.PluginRegistry, name: str) -> qosmanager.PeriodicStrategy:
    plugin = registry.get(name).plugin
    assert isinstance(plugin, qosmanager.PeriodicStrategy)
    return plugin
