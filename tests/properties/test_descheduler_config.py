"""DeschedulerConfiguration and plugin args from outside: a typed, valid configuration
whose profiles build, or one ConfigError listing the problems; nothing else raises."""

from __future__ import annotations

import textwrap
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from descheduler import config, framework, plugins
from descheduler.app import simulate
from descheduler.framework import profiles
from tests.properties.strategies import mutated

EVERY_PLUGIN = yaml.safe_load(
    textwrap.dedent("""\
    apiVersion: descheduler/v1alpha2
    kind: DeschedulerConfiguration
    deschedulingInterval: 2m
    dryRun: false
    nodeSelector: "count>3,zone=a"
    maxNoOfPodsToEvictPerNode: 5
    maxNoOfPodsToEvictPerNamespace: 3
    maxNoOfPodsToEvictTotal: 20
    leaderElection: {leaderElect: true, resourceName: d, resourceNamespace: ns, leaseDuration: 15s}
    profiles:
    - name: all
      plugins:
        balance: {enabled: [{name: LowNodeLoad}, {name: HighNodeUtilization}]}
        deschedule: {enabled: [{name: PodLifeTime}, {name: RemoveFailedPods}]}
      pluginConfig:
      - name: DefaultEvictor
        args:
          nodeSelector: "zone notin (x,y)"
          labelSelector: {matchExpressions: [{key: app, operator: In, values: [a]}]}
          priorityThreshold: {value: 1000}
          minPodAge: 90s
          nodeFit: true
      - name: LowNodeLoad
        args:
          evictableNamespaces: {exclude: [kube-system]}
          nodeMetricExpirationSeconds: 180
          lowThresholds: {cpu: 45, memory: 55}
          highThresholds: {cpu: 75, memory: 80}
          prodLowThresholds: {cpu: 5}
          prodHighThresholds: {cpu: 15}
          anomalyCondition: {consecutiveAbnormalities: 5, timeout: 1m}
          podSelectors: [{name: web, selector: {matchLabels: {app: web}}}]
          nodePools: [{name: gpu, lowThresholds: {cpu: 10}, highThresholds: {cpu: 20}}]
          resourceWeights: {cpu: 1, memory: 1}
      - name: HighNodeUtilization
        args: {thresholds: {cpu: 20}}
      - name: RemovePodsHavingTooManyRestarts
        args: {podRestartThreshold: 5, states: [CrashLoopBackOff]}
      - name: PodLifeTime
        args:
          maxPodLifeTimeSeconds: 3600
          states: [Pending]
      - name: RemoveFailedPods
        args: {reasons: [OOMKilled], minPodLifetimeSeconds: 0, exitCodes: [1]}
    """)
)


def build(loaded: config.DeschedulerConfiguration) -> None:
    framework.Runner.from_config(
        loaded,
        plugins.registry(),
        source=framework.StaticSource(),
        backend=simulate.NoEvictions(),
        metrics=framework.Metrics(CollectorRegistry()),
    )


def test_the_base_document_is_valid() -> None:
    """The document the mutations start from loads and builds (else they test nothing)."""
    build(config.load_config(yaml.safe_dump(EVERY_PLUGIN), plugins=plugins.in_tree()))


def check(text: str) -> None:
    try:
        loaded = config.load_config(text, plugins=plugins.in_tree())
    except config.ConfigError as err:
        assert err.errors, "a ConfigError lists at least one problem"
        for problem in err.errors:
            assert str(problem)
        return
    try:
        build(loaded)
    except profiles.StartupError as err:  # a plugin refuses a valid-but-unsupported setting
        assert str(err).startswith("cannot start")
    assert config.load_config(config.dump_config(loaded), plugins=plugins.in_tree()) == loaded


@given(mutated(EVERY_PLUGIN))
def test_a_mutated_configuration_loads_or_lists_its_errors(doc: Any) -> None:
    """One to three fields replaced, dropped or added anywhere: loads+builds, or ConfigError."""
    check(yaml.safe_dump(doc))


@given(st.text(max_size=200))
def test_arbitrary_text_loads_or_lists_its_errors(text: str) -> None:
    """Not even YAML: ConfigError, never a traceback."""
    check(text)
