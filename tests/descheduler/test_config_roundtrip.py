"""What `--write-config-to` writes loads back into an equal configuration."""

from __future__ import annotations

import pathlib
import textwrap

import pytest
import yaml

from descheduler import config
from descheduler.config import ConfigKind
from descheduler.plugins import in_tree

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures" / "descheduler"


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(path.name, id=path.stem)
        for path in sorted(FIXTURES.glob("*.yaml"))
        if "invalid" not in path.name and not path.name.startswith("snapshot-")
    ],
)
def test_fixture_round_trips(name: str) -> None:
    """Load, write, load again: the two objects are equal."""
    loaded = config.load_config(FIXTURES / name, plugins=in_tree())
    written = config.dump_config(loaded)
    assert config.load_config(written, plugins=in_tree()) == loaded
    assert config.dump_config(config.load_config(written, plugins=in_tree())) == written


@pytest.mark.parametrize("kind", list(ConfigKind), ids=[kind.value for kind in ConfigKind])
def test_defaults_round_trip(kind: ConfigKind) -> None:
    """The default configuration of each kind survives a round trip."""
    default = config.default_configuration(kind, plugins=in_tree())
    assert config.load_config(config.dump_config(default), plugins=in_tree()) == default


def test_every_plugin_with_every_field_round_trips() -> None:
    """A profile configuring every in-tree plugin with non-default values round-trips."""
    text = textwrap.dedent("""\
        apiVersion: descheduler/v1alpha2
        kind: DeschedulerPolicy
        nodeSelector: "count>3,zone=a"
        metricsProviders:
        - source: Prometheus
          prometheus: {url: "http://prom:9090", authToken: {secretReference: {namespace: ns, name: tok}}}
        profiles:
        - name: all
          nodeSelector: {matchLabels: {tier: web}}
          pluginConfig:
          - name: DefaultEvictor
            args:
              nodeSelector: "zone notin (x,y)"
              labelSelector: {matchExpressions: [{key: app, operator: Exists}]}
              priorityThreshold: {value: 1000}
              minPodAge: 90s
              noEvictionPolicy: Mandatory
              podProtections: {defaultDisabled: [DaemonSetPods]}
          - name: MigrationController
            args:
              nodeSelector: "pool=batch"
              skipEvictionGates: [NodeFit, PVC]
              maxMigratingGlobally: 7
              maxMigratingPerWorkload: "25%"
              objectLimiters: {namespace: {duration: 1h30m, maxMigrating: "10%", burst: 2}}
              evictQPS: 2.5
              defaultDeleteOptions: {gracePeriodSeconds: 30, propagationPolicy: Foreground, dryRun: [All]}
              arbitrationArgs: {enabled: false, interval: 750ms}
          - name: LowNodeLoad
            args:
              useDeviationThresholds: true
              lowThresholds: {cpu: 10.5, "nvidia.com/gpu": 5}
              highThresholds: {cpu: 20, "nvidia.com/gpu": 10}
              prodLowThresholds: {cpu: 5}
              prodHighThresholds: {cpu: 15}
              podSelectors: [{name: web, selector: {matchLabels: {app: web}}}]
              nodePools: [{name: gpu, useDeviationThresholds: false, resourceWeights: {"nvidia.com/gpu": 4}}]
          - name: LowNodeUtilization
            args:
              useDeviationThresholds: true
              thresholds: {cpu: 30}
              targetThresholds: {cpu: 10}
              metricsUtilization: {source: Prometheus, prometheus: {query: "instance:node_cpu:rate:sum"}}
              evictableNamespaces: {exclude: [kube-system]}
          - name: HighNodeUtilization
            args: {thresholds: {cpu: 20}, evictionModes: [OnlyThresholdingResources]}
          - name: RemovePodsViolatingNodeTaints
            args: {includedTaints: ["dedicated=gpu"], includePreferNoSchedule: true}
          - name: RemovePodsHavingTooManyRestarts
            args: {podRestartThreshold: 5, states: [CrashLoopBackOff]}
          - name: PodLifeTime
            args:
              ownerKinds: {exclude: [Job]}
              conditions: [{type: Ready, status: "False", minTimeSinceLastTransitionSeconds: 60}]
              exitCodes: [137]
          - name: RemoveFailedPods
            args: {reasons: [OOMKilled], minPodLifetimeSeconds: 0, exitCodes: [1]}
          - name: CustomPriority
            args:
              paused: true
              dryRun: true
              evictableNamespaces: {exclude: [kube-system]}
              nodeSelector: {matchLabels: {pool: spot}}
              podSelectors: [{name: web, selector: {matchLabels: {app: web}}}]
              nodeFit: false
              mode: DrainNode
              autoCordon: true
              evictionOrder:
              - name: on-demand
                nodeSelector: {matchLabels: {billing: on-demand}}
                keepThreshold: {cpu: 30}
                rejectThreshold: {cpu: 80, memory: 90}
              - name: spot
                nodeSelector: {matchLabels: {billing: spot}}
          - name: FragmentationAware
            args:
              paused: true
              dryRun: true
              nodeSelector: {matchLabels: {pool: gpu}}
              evictableNamespaces: {include: [batch]}
              podSelectors: [{selector: {matchLabels: {app: train}}}]
              nodeFit: false
              resources: [cpu, memory, nvidia.com/gpu]
              imbalanceThreshold: 0.3
              minImprovementThreshold: 0.05
        """)
    loaded = config.load_config(text, plugins=in_tree())
    again = config.load_config(config.dump_config(loaded), plugins=in_tree())
    assert again == loaded
    assert set(again.profiles[0].plugin_config) >= set(in_tree()) - {
        "RemoveDuplicates",
        "RemovePodsViolatingInterPodAntiAffinity",
        "RemovePodsViolatingNodeAffinity",
        "RemovePodsViolatingTopologySpreadConstraint",
    }


def test_written_file_is_plain_yaml_with_every_default() -> None:
    """The written YAML names apiVersion/kind on the document and on every args block."""
    data = yaml.safe_load(config.dump_config(config.default_configuration(plugins=in_tree())))
    assert data["apiVersion"] == "descheduler/v1alpha2"
    assert data["deschedulingInterval"] == "0s"
    assert data["maxNoOfPodsToEvictPerNode"] == 5
    assert data["maxNoOfPodsToEvictTotal"] == 20
    assert "maxNoOfPodsToEvictPerNamespace" not in data
    (entry,) = data["profiles"][0]["pluginConfig"]
    assert entry["args"]["kind"] == "DefaultEvictorArgs"
    assert data["profiles"][0]["plugins"]["evict"] == {
        "enabled": [{"name": "DefaultEvictor"}],
        "disabled": [{"name": "*"}],
    }


def test_disabled_defaults_stay_disabled_after_round_trip() -> None:
    """A point emptied with disabled "*" is written so that reloading keeps it empty."""
    loaded = config.load_config(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"
        "profiles:\n- name: p\n  plugins:\n    filter:\n      disabled: [{name: '*'}]\n",
        plugins=in_tree(),
    )
    assert config.load_config(config.dump_config(loaded), plugins=in_tree()) == loaded


def test_args_to_mapping_round_trips_through_from_mapping() -> None:
    """Every Args type's defaults survive to_mapping/from_mapping (where defaults are valid)."""
    for spec in in_tree().values():
        try:
            args = spec.args.from_mapping({})
        except config.ConfigError:
            continue  # upstream plugins with required args (e.g. LowNodeUtilization thresholds)
        assert spec.args.from_mapping(args.to_mapping()) == args, spec.name
