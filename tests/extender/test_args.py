"""LoadAwareSchedulingArgs: Koordinator's names and defaults; every bad field reported with its path."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from extender import args as argsmod


def test_defaults_are_koordinators_except_scheduling_on_expired_metrics() -> None:
    """cpu 65 / memory 95 thresholds, 85/70 scaling factors, 180 s expiry, weights 1/1."""
    args = argsmod.decode_args({})
    assert dict(args.usage_thresholds) == {"cpu": 65, "memory": 95}
    assert dict(args.estimated_scaling_factors) == {"cpu": 85, "memory": 70}
    assert dict(args.resource_weights) == {"cpu": 1, "memory": 1}
    assert args.node_metric_expiration_seconds == 180
    assert args.filter_expired_node_metrics is True
    assert args.enable_schedule_when_node_metrics_expired is True


def test_a_koord_scheduler_args_block_loads_unchanged() -> None:
    """The args of a koord-scheduler LoadAwareScheduling pluginConfig, copied as they are."""
    text = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: LoadAwareSchedulingArgs
filterExpiredNodeMetrics: false
nodeMetricExpirationSeconds: 300
resourceWeights: {cpu: 1, memory: 1}
usageThresholds: {cpu: 75, memory: 85}
prodUsageThresholds: {cpu: 55, memory: 75}
scoreAccordingProdUsage: true
estimatedScalingFactors: {cpu: 80}
aggregated:
  usageThresholds: {cpu: 65, memory: 95}
  usageAggregationType: p99
  usageAggregatedDuration: 5m
  scoreAggregationType: p99
  scoreAggregatedDuration: 5m
"""
    args = argsmod.decode_args(yaml.safe_load(text))
    assert args.node_metric_expiration_seconds == 300
    assert dict(args.estimated_scaling_factors) == {"cpu": 80, "memory": 70}
    assert args.aggregated is not None
    assert args.aggregated.usage_aggregated_duration == timedelta(minutes=5)
    assert args.aggregated.filters


def test_every_problem_is_reported_with_its_field_path() -> None:
    """Unknown fields, wrong types and out-of-range values: all listed in one error."""
    raw = {
        "usageTreshold": {"cpu": 65},
        "usageThresholds": {"cpu": 165, "memory": "high"},
        "nodeMetricExpirationSeconds": 0,
        "filterExpiredNodeMetrics": "yes",
        "aggregated": {"usageAggregationType": "p42", "usageAggregatedDuration": "soon"},
        "resourceWeights": {"cpu": 1, "nvidia.com/gpu": 2},
    }
    with pytest.raises(argsmod.ArgsError) as caught:
        argsmod.decode_args(raw)
    problems = caught.value.problems
    assert 'usageTreshold: unknown field (did you mean "usageThresholds"?)' in problems
    assert "usageThresholds.cpu: must be within [0, 100] (got 165)" in problems
    assert "usageThresholds.memory: must be an integer, not a string" in problems
    assert "nodeMetricExpirationSeconds: must be >= 1" in problems
    assert "filterExpiredNodeMetrics: must be true or false, not a string" in problems
    assert "aggregated.usageAggregationType: must be one of: avg, p50, p90, p95, p99" in problems
    assert any(
        p.startswith("aggregated.usageAggregatedDuration: invalid duration 'soon' (use Go syntax")
        for p in problems
    )
    assert any(p.startswith("estimatedScalingFactors[nvidia.com/gpu]: missing") for p in problems)
    assert len(problems) == 8


def test_a_foreign_kind_is_refused() -> None:
    """A whole KubeSchedulerConfiguration is not the args block: say so."""
    with pytest.raises(argsmod.ArgsError) as caught:
        argsmod.decode_args({"apiVersion": "v1", "kind": "KubeSchedulerConfiguration"})
    assert caught.value.problems[:2] == [
        "apiVersion: must be one of kubescheduler.config.k8s.io/v1, "
        "kubescheduler.config.k8s.io/v1beta3 (got 'v1')",
        "kind: must be LoadAwareSchedulingArgs (got 'KubeSchedulerConfiguration')",
    ]


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "extender.cli", *argv], capture_output=True, text=True, check=False
    )


def test_the_cli_exits_2_listing_every_problem(tmp_path: Path) -> None:
    """--validate on a bad file: exit 2, a count, one line per problem."""
    bad = tmp_path / "args.yaml"
    bad.write_text("usageThresholds: {cpu: 101}\nbogus: 1\n")
    done = run_cli("--config", str(bad), "--validate")
    assert done.returncode == 2
    assert "invalid configuration (2 problems):" in done.stderr
    assert "usageThresholds.cpu: must be within [0, 100] (got 101)" in done.stderr


def test_the_cli_writes_the_defaulted_args_that_load_back(tmp_path: Path) -> None:
    """--write-config-to - prints args that decode to the same values."""
    done = run_cli("--write-config-to", "-")
    assert done.returncode == 0, done.stderr
    written = yaml.safe_load(done.stdout)
    assert written["usageThresholds"] == {"cpu": 65, "memory": 95}
    assert argsmod.decode_args(written) == argsmod.decode_args({})


def test_an_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    """A missing file is named, exit 2."""
    done = run_cli("--config", str(tmp_path / "nope.yaml"), "--validate")
    assert done.returncode == 2
    assert "cannot read the config file" in done.stderr
