"""Dry-run (SCENARIOS.md D6): the decisions of a real run, no writes, marked everywhere."""

from __future__ import annotations

import logging

import pytest

from descheduler import framework
from descheduler.framework import DisruptionBudget, Reason
from kube import eviction
from tests import builders
from tests.descheduler import fakes
from tests.descheduler.test_evictor_limits import hottest_first, three_hot_nodes

pod = builders.make_pod


def decisions(report: framework.CycleReport) -> tuple[list[str], list[tuple[str, str, str]]]:
    skips = [(s.pod, s.reason_code.value, s.detail) for s in report.skipped]
    return report.evicted_pods, skips


def harness(
    dry_run: bool, source: framework.StaticSource, backend: fakes.FakeBackend | None = None
) -> fakes.Harness:
    raw = fakes.policy(
        balance=["Hot"], dryRun=dry_run, maxNoOfPodsToEvictPerNode=1, maxNoOfPodsToEvictTotal=2
    )
    return fakes.harness(raw, fakes.registry_with(Hot=hottest_first), source, backend=backend)


def test_dry_run_decides_exactly_like_a_real_run(caplog: pytest.LogCaptureFixture) -> None:
    """Same pods, same reasons; the backend is never called; a second cycle agrees."""
    real = harness(False, three_hot_nodes()).runner.run_once()
    dry = harness(True, three_hot_nodes())
    with caplog.at_level(logging.DEBUG, logger="descheduler"):
        first = dry.runner.run_once()
    second = dry.runner.run_once()
    assert decisions(first) == decisions(real) == decisions(second)
    assert first.evicted_pods == ["default/a0", "default/b0"]
    assert first.dry_run and not real.dry_run
    assert first.projections == real.projections
    assert dry.backend.calls == []
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("descheduler.")]
    assert lines and all(line.startswith("[dry-run] ") for line in lines), lines


def test_dry_run_metrics_never_count_success() -> None:
    """Dry-run evictions are result="dry_run"; the dry_run gauge is 1."""
    h = harness(True, three_hot_nodes())
    h.runner.run_once()
    labels = {"strategy": "Hot", "profile": "p1", "namespace": "default", "node": "a"}
    assert h.sample("nodeqos_descheduler_pods_evicted_total", result="dry_run", **labels) == 1
    assert h.sample("nodeqos_descheduler_pods_evicted_total", result="success", **labels) == 0
    assert h.sample("nodeqos_descheduler_dry_run") == 1
    assert harness(False, three_hot_nodes()).sample("nodeqos_descheduler_dry_run") == 0


def budget(allowed: int, *, generation: int = 1) -> DisruptionBudget:
    return DisruptionBudget.from_api(
        {
            "metadata": {"name": "web", "namespace": "default", "generation": generation},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
            "status": {
                "observedGeneration": 1,
                "disruptionsAllowed": allowed,
                "currentHealthy": 3,
                "desiredHealthy": 3 - allowed,
            },
        }
    )


@pytest.mark.parametrize(
    ("pdb", "expected"),
    [
        pytest.param(budget(0), ["default/other"], id="budget-exhausted"),
        pytest.param(budget(1), ["default/other", "default/web-0"], id="one-disruption-allowed"),
        pytest.param(budget(5, generation=2), ["default/other"], id="status-not-computed"),
    ],
)
def test_dry_run_predicts_pdb_refusals(pdb: DisruptionBudget, expected: list[str]) -> None:
    """With no API call to ask, the budget's status predicts the 429 (D4 in dry-run)."""
    pods = [pod(f"web-{i}", labels={"app": "web"}, cpu="900m") for i in range(3)]
    pods.append(pod("other", cpu="100m"))
    source = framework.StaticSource(nodes=fakes.nodes("n1", "n2"), pods=pods, pdbs=[pdb])
    raw = fakes.policy(balance=["All"], dryRun=True)
    report = fakes.harness(raw, fakes.registry_with(All=fakes.evict_all), source).runner.run_once()
    assert report.evicted_pods == expected
    blocked = [s.pod for s in report.skipped if s.reason_code is Reason.PDB_BLOCKED]
    assert len(blocked) == 4 - len(expected)


def test_dry_run_never_adds_a_backoff() -> None:
    """A predicted 429 leaves no rest behind: a second dry-run cycle is refused by the PDB again."""
    pods = [pod(f"web-{i}", labels={"app": "web"}) for i in range(3)]
    source = framework.StaticSource(nodes=fakes.nodes("n1", "n2"), pods=pods, pdbs=[budget(0)])
    raw = fakes.policy(balance=["All"], dryRun=True)
    h = fakes.harness(raw, fakes.registry_with(All=fakes.evict_all), source)
    first, second = h.runner.run_once(), h.runner.run_once()
    codes = [s.reason_code for s in first.skipped]
    assert codes == [Reason.PDB_BLOCKED] * 3
    assert [s.reason_code for s in second.skipped] == codes


def test_dry_run_lets_unhealthy_pods_go_while_the_budget_is_healthy() -> None:
    """An unready pod may be evicted despite disruptionsAllowed 0 (IfHealthyBudget)."""
    pdb = DisruptionBudget.from_api(
        {
            "metadata": {"name": "web", "namespace": "default", "generation": 1},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
            "status": {
                "observedGeneration": 1,
                "disruptionsAllowed": 0,
                "currentHealthy": 2,
                "desiredHealthy": 2,
            },
        }
    )
    sick = pod("sick", labels={"app": "web"}, ready=False)
    source = framework.StaticSource(nodes=fakes.nodes("n1", "n2"), pods=[sick], pdbs=[pdb])
    raw = fakes.policy(balance=["All"], dryRun=True)
    report = fakes.harness(raw, fakes.registry_with(All=fakes.evict_all), source).runner.run_once()
    assert report.evicted_pods == ["default/sick"]


def test_real_run_leaves_pdbs_to_the_server() -> None:
    """A real run does not pre-judge budgets: the API server answers (here: the fake says yes)."""
    pods = [pod("web-0", labels={"app": "web"})]
    source = framework.StaticSource(nodes=fakes.nodes("n1", "n2"), pods=pods, pdbs=[budget(0)])
    backend = fakes.FakeBackend()
    raw = fakes.policy(balance=["All"])
    fakes.harness(
        raw, fakes.registry_with(All=fakes.evict_all), source, backend=backend
    ).runner.run_once()
    assert backend.calls == ["default/web-0"]


def test_dry_run_never_calls_an_evict_plugin() -> None:
    """Koordinator-style evict plugins are skipped too: a dry run writes nothing at all."""
    raw = fakes.policy(
        dryRun=True,
        profiles=[
            {
                "name": "k",
                "plugins": {
                    "evict": {"enabled": ["DefaultEvictor"]},
                    "balance": {"enabled": ["All"]},
                },
            }
        ],
    )
    source = framework.StaticSource(nodes=fakes.nodes("n1", "n2"), pods=[pod("a")])
    backend = fakes.FakeBackend({"a": eviction.Outcome.FAILED})
    h = fakes.harness(raw, fakes.registry_with(All=fakes.evict_all), source, backend=backend)
    assert h.runner.run_once().evicted_pods == ["default/a"]
    assert backend.calls == []
