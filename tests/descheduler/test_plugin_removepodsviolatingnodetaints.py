"""RemovePodsViolatingNodeTaints through the runner: which taints count, scope, reasons."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from descheduler import framework, plugins
from descheduler.plugins import removepodsviolatingnodetaints as plugin
from descheduler.plugins.removepodsviolatingnodetaints.taints import TaintFilter
from kube import objects
from tests import builders
from tests.descheduler import fakes

FIXTURE = Path(__file__).parents[1] / "fixtures" / "descheduler" / "snapshot-deschedule.yaml"
NAME = plugin.NAME
pod = builders.make_pod
node = builders.make_node
EXISTS = [{"key": "dedicated", "operator": "Exists"}]


def run(
    args: dict[str, Any],
    pods: list[objects.Pod],
    nodes: list[objects.Node],
    *,
    evictor: dict[str, Any] | None = None,
    **top: Any,
) -> framework.CycleReport:
    """One cycle of a profile running only this plugin (and DefaultEvictor)."""
    return fakes.run_plugin(NAME, args, pods, nodes=nodes, evictor=evictor, **top)


outcome = fakes.outcome


def tainted(*taints: str) -> list[objects.Node]:
    return [node("n1", taints=list(taints)), node("n2")]


CASES = [
    pytest.param({}, [pod("p")], tainted(), [], [], id="untainted-node"),
    pytest.param(
        {}, [pod("p")], tainted("dedicated=db:NoSchedule"), ["default/p"], [], id="no-schedule"
    ),
    pytest.param(
        {},
        [pod("p", tolerations=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])],
        tainted("dedicated=db:NoSchedule"),
        [],
        [],
        id="tolerated-equal",
    ),
    pytest.param(
        {},
        [pod("p", tolerations=[{"key": "dedicated", "value": "web"}])],
        tainted("dedicated=db:NoSchedule"),
        ["default/p"],
        [],
        id="toleration-other-value",
    ),
    pytest.param(
        {},
        [pod("p", tolerations=EXISTS)],
        tainted("dedicated=db:NoSchedule"),
        [],
        [],
        id="tolerated-exists",
    ),
    pytest.param(
        {}, [pod("p")], tainted("dedicated=db:PreferNoSchedule"), [], [], id="prefer-ignored"
    ),
    pytest.param(
        {"includePreferNoSchedule": True},
        [pod("p")],
        tainted("dedicated=db:PreferNoSchedule"),
        ["default/p"],
        [],
        id="prefer-included",
    ),
    pytest.param(
        {"includePreferNoSchedule": True},
        [pod("p")],
        tainted("dedicated=db:NoExecute"),
        [],
        [],
        id="no-execute-left-to-kubelet",
    ),
    pytest.param(
        {"excludedTaints": ["dedicated"]},
        [pod("p")],
        tainted("dedicated=db:NoSchedule"),
        [],
        [],
        id="excluded-by-key",
    ),
    pytest.param(
        {"excludedTaints": ["dedicated=db"]},
        [pod("p")],
        tainted("dedicated=db:NoSchedule"),
        [],
        [],
        id="excluded-by-key-value",
    ),
    pytest.param(
        {"excludedTaints": ["dedicated=web"]},
        [pod("p")],
        tainted("dedicated=db:NoSchedule"),
        ["default/p"],
        [],
        id="excluded-other-value",
    ),
    pytest.param(
        {"excludedTaints": ["dedicated"]},
        [pod("p")],
        tainted("dedicated=db:NoSchedule", "gpu:NoSchedule"),
        ["default/p"],
        [],
        id="excluded-one-of-two",
    ),
    pytest.param(
        {"includedTaints": ["gpu"]},
        [pod("p")],
        tainted("dedicated=db:NoSchedule"),
        [],
        [],
        id="not-included",
    ),
    pytest.param(
        {"includedTaints": ["dedicated=db"]},
        [pod("p")],
        tainted("dedicated=db:NoSchedule"),
        ["default/p"],
        [],
        id="included-by-key-value",
    ),
    pytest.param(
        {"namespaces": {"include": ["other"]}},
        [pod("p"), pod("q", namespace="other")],
        tainted("dedicated=db:NoSchedule"),
        ["other/q"],
        [],
        id="namespaces-include",
    ),
    pytest.param(
        {"namespaces": {"exclude": ["other"]}},
        [pod("p"), pod("q", namespace="other")],
        tainted("dedicated=db:NoSchedule"),
        ["default/p"],
        [],
        id="namespaces-exclude",
    ),
    pytest.param(
        {"labelSelector": {"matchLabels": {"app": "web"}}},
        [pod("p", labels={"app": "web"}), pod("q", labels={"app": "db"})],
        tainted("dedicated=db:NoSchedule"),
        ["default/p"],
        [],
        id="label-selector",
    ),
    pytest.param(
        {},
        [pod("done", phase="Succeeded"), pod("broke", phase="Failed")],
        tainted("dedicated=db:NoSchedule"),
        [],
        [],
        id="terminal-pods-not-considered",
    ),
    pytest.param(
        {},
        [pod("ds", owner="DaemonSet")],
        tainted("dedicated=db:NoSchedule"),
        [],
        [("default/ds", "filtered")],
        id="daemonset-filtered",
    ),
    pytest.param(
        {},
        [pod("p")],
        [node("n1", taints=["dedicated=db:NoSchedule"]), node("n2", taints=["gpu:NoSchedule"])],
        [],
        [("default/p", "no_fit")],
        id="nowhere-else-to-go",
    ),
]


@pytest.mark.parametrize(("args", "pods", "nodes", "evicted", "skipped"), CASES)
def test_cases(
    args: dict[str, Any],
    pods: list[objects.Pod],
    nodes: list[objects.Node],
    evicted: list[str],
    skipped: list[tuple[str, str]],
) -> None:
    """Exactly the pods left with an untolerated counted taint are evicted; the rest say why."""
    assert outcome(run(args, pods, nodes)) == (evicted, skipped)


def test_limit_reached_is_recorded_for_every_remaining_candidate() -> None:
    """A per-node cap of 1: the first candidate in pod order goes, the others are limit_reached."""
    report = run(
        {},
        [pod("a"), pod("b"), pod("c")],
        tainted("dedicated=db:NoSchedule"),
        maxNoOfPodsToEvictPerNode=1,
    )
    assert outcome(report) == (
        ["default/a"],
        [("default/b", "limit_reached"), ("default/c", "limit_reached")],
    )


def test_nodes_in_name_order_then_pod_order() -> None:
    """Candidates are tried node by node (by name), pods by namespace and name."""
    nodes = [node(n, taints=["dedicated=db:NoSchedule"]) for n in ("n2", "n1")] + [node("n3")]
    pods = [pod("z", node="n1"), pod("a", node="n2"), pod("m", node="n1", namespace="b")]
    assert outcome(run({}, pods, nodes))[0] == ["b/m", "default/z", "default/a"]


def test_eviction_reason_names_the_taint() -> None:
    """The eviction's reason names every untolerated taint and the node."""
    report = run({}, [pod("p")], tainted("dedicated=db:NoSchedule", "gpu:NoSchedule"))
    [eviction] = report.evictions
    assert (
        eviction.reason
        == "does not tolerate taint dedicated=db:NoSchedule, gpu:NoSchedule of node n1"
    )


@pytest.mark.parametrize(
    ("included", "excluded", "taint", "counts"),
    [
        pytest.param((), (), "k=v:NoSchedule", True, id="default"),
        pytest.param((), ("k",), "k=v:NoSchedule", False, id="excluded-key"),
        pytest.param((), ("k=v",), "k:NoSchedule", True, id="key-value-needs-a-value"),
        pytest.param(("k=v",), (), "k=v:NoSchedule", True, id="included-key-value"),
        pytest.param(("k",), (), "j=v:NoSchedule", False, id="not-included"),
        pytest.param((), (), "k=v:PreferNoSchedule", False, id="prefer"),
    ],
)
def test_taint_filter(
    included: tuple[str, ...], excluded: tuple[str, ...], taint: str, counts: bool
) -> None:
    """A taint counts by effect, then exclusion, then inclusion (key or key=value)."""
    [parsed] = node("n", taints=[taint]).taints
    taints = TaintFilter.build(
        include_prefer_no_schedule=False, included=included, excluded=excluded
    )
    assert taints.counts(parsed) is counts


def test_snapshot_fixture() -> None:
    """The simulate fixture: the pod without a toleration on the tainted node goes."""
    items = yaml.safe_load(FIXTURE.read_text())["items"]
    profile = {"name": "p1", "plugins": {"deschedule": {"enabled": [NAME]}}}
    h = fakes.harness(
        fakes.policy(profiles=[profile], dryRun=True),
        plugins.registry(),
        framework.StaticSource.from_objects(items),
    )
    report = h.runner.run_once()
    assert report.evicted_pods == ["shop/web-7d9f-x2k4p"]
    assert [(s.pod, s.reason_code.value) for s in report.skipped] == [
        ("kube-system/log-agent-b7x2q", "filtered")
    ]
    assert h.backend.calls == []
