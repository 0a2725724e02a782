"""README's "Writing a QoS plugin": the shown code is the tested example, and it works."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import click
from prometheus_client import CollectorRegistry

import qosmanager
from tests.qosmanager import example_plugin
from tests.qosmanager.builders import BE, LS, FakeHealth, FakeStates, make_pod, pod_meta

ROOT = Path(__file__).resolve().parents[2]


def readme_example() -> str:
    """The first python block of the README section."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Writing a QoS plugin", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the section has no python block"
    return block.group(1)


def test_readme_shows_the_tested_example() -> None:
    """The README block and tests/qosmanager/example_plugin.py are the same text."""
    assert readme_example() == Path(example_plugin.__file__).read_text()


class SignallingStates(FakeStates):
    """States that tell the test when a plugin has looked at the pods."""

    looked: threading.Event

    def pods(self):  # type: ignore[no-untyped-def]
        result = super().pods()
        self.looked.set()
        return result


def test_example_plugin_runs_through_the_public_api() -> None:
    """Registered, enabled by --qos-extension-plugins, configured by its flag, run, stopped."""
    registry = qosmanager.PluginRegistry()
    plugin = example_plugin.register(registry)
    parsed: dict[str, object] = {}
    command = click.Command("agent", params=registry.click_params(), callback=parsed.update)
    command.main(
        ["--be-pod-counter-interval", "0.5", "--qos-extension-plugins", "BEPodCounter=true"],
        standalone_mode=False,
    )
    assert plugin.interval == 0.5
    manager = qosmanager.Manager(
        registry,
        builtin_gates=qosmanager.FeatureGates(qosmanager.BUILTIN_FEATURES),
        extension_gates=registry.extension_gates(parsed["qos_extension_plugins"]),  # type: ignore[arg-type]
        health=FakeHealth(),
        metrics=qosmanager.QoSMetrics(CollectorRegistry()),
    )
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
