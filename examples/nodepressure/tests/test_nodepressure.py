"""NodePressure as the stock descheduler loads it: through its entry point, args, one cycle."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from pathlib import Path

import nodeqos_nodepressure
import pytest
import yaml

from descheduler import config, framework, plugins
from descheduler.app import simulate

HERE = Path(__file__).parent
NOW = datetime(2024, 5, 1, 12, tzinfo=UTC)


def registry() -> framework.Registry:
    return plugins.registry()  # in-tree + installed: this package's entry point included


def test_the_installed_entry_point_registers_the_plugin() -> None:
    """`pip install` of this package is all the descheduler needs to know NodePressure."""
    entry = registry().entry(nodeqos_nodepressure.NAME)
    assert entry.spec.args is nodeqos_nodepressure.NodePressureArgs
    assert entry.factory is nodeqos_nodepressure.factory
    assert entry.error is None


def test_args_defaults() -> None:
    """No args: MemoryPressure, BE pods, two per node."""
    args = nodeqos_nodepressure.Args.from_mapping(None)
    assert args.conditions == (nodeqos_nodepressure.Pressure.MEMORY,)
    assert [c.value for c in args.qos_classes] == ["BE"]
    assert args.max_pods_per_node == 2


def test_bad_args_are_listed_with_their_paths() -> None:
    """The descheduler's loader checks these args like an in-tree plugin's."""
    text = textwrap.dedent(
        """\
        apiVersion: descheduler/v1alpha2
        kind: DeschedulerConfiguration
        profiles:
        - name: pressure
          plugins: {deschedule: {enabled: [{name: NodePressure}]}}
          pluginConfig:
          - name: NodePressure
            args: {conditions: [MemoryPresure], qosClasses: [], maxPodsPerNode: 0, extra: 1}
        """
    )
    with pytest.raises(config.ConfigError) as caught:
        config.load_config(text, plugins=registry().catalog())
    where = "profiles[0].pluginConfig[NodePressure].args"
    assert [str(e) for e in caught.value.errors] == [
        f"{where}.conditions[0]: must be one of: MemoryPressure, DiskPressure, PIDPressure"
        " (got 'MemoryPresure')",
        f"{where}.maxPodsPerNode: must be >= 1",
        f"{where}.extra: unknown field; known fields: apiVersion, kind, namespaces,"
        " labelSelector, conditions, qosClasses, maxPodsPerNode",
        f"{where}.qosClasses: must name at least one QoS class",
    ]


def test_one_cycle_over_the_snapshot() -> None:
    """On the pressured node the two sparest BE pods go; the LS pod and the calm node stay."""
    cfg = config.load_config(HERE.parent / "descheduler.yaml", plugins=registry().catalog())
    items = yaml.safe_load((HERE / "snapshot.yaml").read_text())["items"]
    source = framework.StaticSource.from_objects(items)
    result = simulate.run(cfg, source, registry(), now=NOW).to_dict()
    assert [(e["pod"], e["plugin"]) for e in result["evictions"]] == [
        ("default/be-lowprio", "NodePressure"),
        ("default/be-young", "NodePressure"),
    ]
    assert result["evictions"][0]["reason"] == "node n1 reports MemoryPressure; BE pod"
