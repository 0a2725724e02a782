"""docs/plugins.md, "A QoS plugin": the shown code is the tested example, and it works."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from click.testing import CliRunner
from prometheus_client import CollectorRegistry

import qosmanager
from agent import cli
from cgroups import CgroupVersion, Driver
from tests.cgroupfs_builder import write_pod_tree
from tests.qosmanager import example_plugin
from tests.qosmanager.builders import (
    BE,
    LS,
    FakeEvictionAPI,
    FakeHealth,
    FakeStates,
    make_pod,
    pod_meta,
)

ROOT = Path(__file__).resolve().parents[2]


def readme_example() -> str:
    """The first python block of the docs section."""
    page = (ROOT / "docs" / "plugins.md").read_text()
    section = page.split("## A QoS plugin", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the section has no python block"
    return block.group(1)


def test_docs_show_the_tested_example() -> None:
    """The docs block and tests/qosmanager/example_plugin.py are the same text."""
    assert readme_example() == Path(example_plugin.__file__).read_text()


class SignallingStates(FakeStates):
    """States that tell the test when a plugin has looked at the pods."""

    looked: threading.Event

    def pods(self):  # type: ignore[no-untyped-def]
        result = super().pods()
        self.looked.set()
        return result


class Extras:
    """A `registry_extras` hook for `agent.cli.build_command` that keeps what it registered."""

    registry: qosmanager.PluginRegistry
    plugin: example_plugin.BEPodCounter

    def __call__(self, registry: qosmanager.PluginRegistry) -> None:
        self.registry = registry
        self.plugin = example_plugin.register(registry)


def test_agent_command_carries_the_example_plugin() -> None:
    """build_command(register), as the docs wire it, shows the plugin's flag and gate."""
    result = CliRunner().invoke(cli.build_command(example_plugin.register), ["--help"])
    assert result.exit_code == 0, result.output
    assert "--be-pod-counter-interval" in result.output
    assert "--qos-extension-plugins" in result.output
    assert "known: BEPodCounter" in result.output


def test_example_plugin_runs_through_the_public_api(tmp_path: Path) -> None:
    """Added by build_command, configured by its flag, enabled by its gate, run, stopped."""
    extras = Extras()
    ctx = cli.build_command(extras).make_context(
        "nodeqos-agent",
        ["--be-pod-counter-interval", "0.5", "--qos-extension-plugins=BEPodCounter=true"],
    )
    registry, plugin = extras.registry, extras.plugin
    assert plugin.interval == 0.5
    metrics = qosmanager.QoSMetrics(CollectorRegistry())
    tree = write_pod_tree(tmp_path, CgroupVersion.V2, Driver.SYSTEMD)
    qosmanager.bind_handle(  # what agent.cluster does once the flags are parsed
        registry,
        qosmanager.Handle(
            fs=tree.fs,
            executor=qosmanager.ResourceExecutor(tree.fs, metrics=metrics),
            evictor=qosmanager.Evictor(FakeEvictionAPI(), metrics=metrics),
            metrics=metrics,
        ),
    )
    builtins_off = {f.name: False for f in qosmanager.BUILTIN_FEATURES}
    manager = qosmanager.Manager(
        registry,
        builtin_gates=qosmanager.FeatureGates(qosmanager.BUILTIN_FEATURES, builtins_off),
        extension_gates=registry.extension_gates(ctx.params["qos_extension_plugins"]),
        health=FakeHealth(),
        metrics=metrics,
    )
    assert manager.enabled() == [example_plugin.NAME]
    states = SignallingStates(
        pod_list=[pod_meta(make_pod(n, qos=q)) for n, q in [("a", BE), ("b", BE), ("c", LS)]]
    )
    states.looked = threading.Event()
    manager.setup_all(None, None, states)  # type: ignore[arg-type]
    stop = threading.Event()
    manager.start(stop)
    assert states.looked.wait(10.0)
    stop.set()
    assert manager.wait(10.0)
    assert plugin.counts[0] == 2
