"""RemovePodsViolatingNodeAffinity through the runner: the rule, the fit, scope, reasons."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from descheduler import framework, plugins
from descheduler.plugins import removepodsviolatingnodeaffinity as plugin
from kube import objects
from tests import builders
from tests.descheduler import fakes

FIXTURE = Path(__file__).parents[1] / "fixtures" / "descheduler" / "snapshot-deschedule.yaml"
NAME = plugin.NAME
REQUIRED = {"nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]}
pod = builders.make_pod
node = builders.make_node


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


def requires(key: str, *values: str) -> dict[str, Any]:
    """A required node affinity: label `key` In `values`."""
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }


def disks(*kinds: str) -> list[objects.Node]:
    """n1, n2, ... labelled disktype=kind."""
    return [node(f"n{i}", labels={"disktype": kind}) for i, kind in enumerate(kinds, 1)]


SSD = requires("disktype", "ssd")

CASES = [
    pytest.param([pod("p", affinity=SSD)], disks("ssd", "ssd"), [], [], id="still-satisfied"),
    pytest.param(
        [pod("p", affinity=SSD)], disks("hdd", "ssd"), ["default/p"], [], id="violated-fits-n2"
    ),
    pytest.param(
        [pod("p", node_selector={"disktype": "ssd"})],
        disks("hdd", "ssd"),
        [],
        [],
        id="node-selector-alone-is-not-enough",
    ),
    pytest.param(
        [pod("p", affinity=requires("disktype", "ssd", "hdd"), node_selector={"zone": "z2"})],
        [
            node("n1", labels={"disktype": "hdd", "zone": "z1"}),
            node("n2", labels={"disktype": "ssd", "zone": "z2"}),
        ],
        ["default/p"],
        [],
        id="affinity-holds-node-selector-broken",
    ),
    pytest.param(
        [pod("p", affinity=SSD)], disks("hdd", "hdd"), [], [("default/p", "no_fit")], id="no-match"
    ),
    pytest.param(
        [pod("p", affinity=SSD)],
        [
            node("n1", labels={"disktype": "hdd"}),
            node("n2", labels={"disktype": "ssd"}, taints=["x:NoSchedule"]),
        ],
        [],
        [("default/p", "no_fit")],
        id="match-is-tainted",
    ),
    pytest.param(
        [pod("p", affinity=SSD, cpu="3")],
        [node("n1", labels={"disktype": "hdd"}), node("n2", labels={"disktype": "ssd"}, cpu="2")],
        [],
        [("default/p", "no_fit")],
        id="match-is-too-small",
    ),
    pytest.param(
        [pod("p", affinity=SSD, cpu="3"), pod("q", affinity=SSD, cpu="3")],
        disks("hdd", "ssd"),
        ["default/p"],
        [("default/q", "no_fit")],
        id="first-move-fills-the-match",
    ),
    pytest.param(
        [pod("p", affinity=SSD, owner="DaemonSet")],
        disks("hdd", "ssd"),
        [],
        [("default/p", "filtered")],
        id="daemonset-filtered",
    ),
    pytest.param(
        [pod("p", affinity=SSD, phase="Succeeded"), pod("q", affinity=SSD, phase="Failed")],
        disks("hdd", "ssd"),
        [],
        [],
        id="terminal-pods-not-considered",
    ),
]


@pytest.mark.parametrize(("pods", "nodes", "evicted", "skipped"), CASES)
def test_required(
    pods: list[objects.Pod],
    nodes: list[objects.Node],
    evicted: list[str],
    skipped: list[tuple[str, str]],
) -> None:
    """A pod whose node broke its required affinity goes only when another node fits it."""
    assert outcome(run(REQUIRED, pods, nodes)) == (evicted, skipped)


@pytest.mark.parametrize(
    ("scope", "evicted"),
    [
        pytest.param({"namespaces": {"include": ["a"]}}, ["a/p"], id="namespaces-include"),
        pytest.param({"namespaces": {"exclude": ["a"]}}, ["b/q"], id="namespaces-exclude"),
        pytest.param(
            {
                "labelSelector": {
                    "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]
                }
            },
            ["b/q"],
            id="label-selector",
        ),
    ],
)
def test_scope(scope: dict[str, Any], evicted: list[str]) -> None:
    """Only pods in the configured namespaces and matching labelSelector are candidates."""
    pods = [
        pod("p", namespace="a", affinity=SSD, labels={"app": "db"}),
        pod("q", namespace="b", affinity=SSD, labels={"app": "web"}),
    ]
    assert outcome(run({**REQUIRED, **scope}, pods, disks("hdd", "ssd"))) == (evicted, [])


def test_fit_is_checked_without_default_evictor_node_fit() -> None:
    """Upstream's own PodFitsAnyNode: no_fit even when DefaultEvictor's nodeFit is off."""
    report = run(
        REQUIRED, [pod("p", affinity=SSD)], disks("hdd", "hdd"), evictor={"nodeFit": False}
    )
    assert outcome(report) == ([], [("default/p", "no_fit")])
    [skip] = report.skipped
    assert skip.plugin == NAME
    assert skip.detail == "fits no other ready node (n2: node selector or affinity mismatch)"


def test_eviction_projects_the_move_to_the_node_it_fits() -> None:
    """The pod's requests move to the first node it fits, and the reason names it."""
    report = run(REQUIRED, [pod("p", affinity=SSD, cpu="1")], disks("hdd", "hdd", "ssd"))
    [eviction] = report.evictions
    assert eviction.reason == (
        "node n1 no longer satisfies the pod's required node affinity; it fits node n3"
    )
    after = {p.node: p.requests_after.cpu for p in report.projections}
    assert after == {"n1": 0, "n3": 1000}


def test_limit_reached_is_recorded_for_every_remaining_candidate() -> None:
    """maxNoOfPodsToEvictTotal 1: the first candidate in pod order goes, the next is limit_reached."""
    pods = [pod("a", affinity=SSD), pod("b", affinity=SSD)]
    report = run(REQUIRED, pods, disks("hdd", "ssd"), maxNoOfPodsToEvictTotal=1)
    assert outcome(report) == (["default/a"], [("default/b", "limit_reached")])


PREFERRED = {"nodeAffinityType": ["preferredDuringSchedulingIgnoredDuringExecution"]}


def prefers(*weights: tuple[int, str]) -> dict[str, Any]:
    """Preferred node affinity terms: (weight, disktype value) each."""
    terms = [
        {
            "weight": weight,
            "preference": {
                "matchExpressions": [{"key": "disktype", "operator": "In", "values": [kind]}]
            },
        }
        for weight, kind in weights
    ]
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}


SSD_50 = prefers((50, "ssd"))

PREFERRED_CASES = [
    pytest.param([pod("p", affinity=SSD_50)], disks("ssd", "hdd"), [], [], id="already-best"),
    pytest.param(
        [pod("p", affinity=SSD_50)], disks("hdd", "ssd"), ["default/p"], [], id="other-scores-more"
    ),
    pytest.param(
        [pod("p", affinity=prefers((10, "hdd"), (10, "ssd")))],
        disks("hdd", "ssd"),
        [],
        [],
        id="equal-scores",
    ),
    pytest.param([pod("p")], disks("hdd", "ssd"), [], [], id="no-preferred-terms"),
    pytest.param(
        [
            pod(
                "p",
                affinity={
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 50, "preference": {}}
                        ]
                    }
                },
            )
        ],
        disks("hdd", "ssd"),
        [],
        [],
        id="empty-preference-matches-nothing",
    ),
    pytest.param(
        [pod("p", affinity=SSD_50)],
        [
            node("n1", labels={"disktype": "hdd"}),
            node("n2", labels={"disktype": "ssd"}, taints=["x:NoSchedule"]),
        ],
        [],
        [("default/p", "no_fit")],
        id="better-node-is-tainted",
    ),
    pytest.param(
        [pod("p", affinity=SSD_50, owner="DaemonSet")],
        disks("hdd", "ssd"),
        [],
        [("default/p", "filtered")],
        id="daemonset-filtered",
    ),
]


@pytest.mark.parametrize(("pods", "nodes", "evicted", "skipped"), PREFERRED_CASES)
def test_preferred(
    pods: list[objects.Pod],
    nodes: list[objects.Node],
    evicted: list[str],
    skipped: list[tuple[str, str]],
) -> None:
    """A pod goes when a node scoring more on its preferred terms has room for it."""
    assert outcome(run(PREFERRED, pods, nodes)) == (evicted, skipped)


def test_preferred_goes_to_the_best_node_it_fits() -> None:
    """The best-scoring node is full: the move is projected to the next best, and said."""
    affinity = prefers((30, "ssd"), (20, "nvme"))
    pods = [pod("p", affinity=affinity, cpu="2")]
    nodes = [
        node("n1", labels={"disktype": "hdd"}),
        node("n2", labels={"disktype": "ssd"}, cpu="1"),
        node("n3", labels={"disktype": "nvme"}),
    ]
    report = run(PREFERRED, pods, nodes)
    [eviction] = report.evictions
    assert eviction.reason == (
        "its preferred node affinity scores node n1 0 and node n3 20, which it fits"
    )
    assert {p.node: p.requests_after.cpu for p in report.projections} == {"n1": 0, "n3": 2000}


def test_no_fit_names_the_better_nodes_only() -> None:
    """The no_fit detail lists why each higher-scoring node was refused."""
    nodes = [
        node("n1", labels={"disktype": "hdd"}),
        node("n2", labels={"disktype": "ssd"}, taints=["x:NoSchedule"]),
        node("n3", labels={"disktype": "hdd"}),
    ]
    [skip] = run(PREFERRED, [pod("p", affinity=SSD_50)], nodes).skipped
    assert skip.detail == (
        "fits no node its preferred node affinity scores higher (n2: untolerated taint x:NoSchedule)"
    )


def test_both_types_run_in_order() -> None:
    """A pod the required pass evicts is gone for the preferred pass; the other is asked there."""
    both = {"nodeAffinityType": REQUIRED["nodeAffinityType"] + PREFERRED["nodeAffinityType"]}
    pods = [
        pod("a", affinity={"nodeAffinity": SSD["nodeAffinity"] | SSD_50["nodeAffinity"]}),
        pod("b", affinity=SSD_50),
    ]
    report = run(both, pods, disks("hdd", "ssd"))
    assert outcome(report) == (["default/a", "default/b"], [])
    assert [e.reason.split(";")[0] for e in report.evictions] == [
        "node n1 no longer satisfies the pod's required node affinity",
        "its preferred node affinity scores node n1 0 and node n2 50, which it fits",
    ]


def test_snapshot_fixture() -> None:
    """The simulate fixture: db-0 moves to the ssd node; the gpu-bound cache fits nowhere."""
    items = yaml.safe_load(FIXTURE.read_text())["items"]
    profile = {
        "name": "p1",
        "plugins": {"deschedule": {"enabled": [NAME]}},
        "pluginConfig": [{"name": NAME, "args": REQUIRED}],
    }
    h = fakes.harness(
        fakes.policy(profiles=[profile], dryRun=True),
        plugins.registry(),
        framework.StaticSource.from_objects(items),
    )
    report = h.runner.run_once()
    assert report.evicted_pods == ["shop/db-0"]
    assert [(s.pod, s.reason_code.value) for s in report.skipped] == [
        ("shop/cache-6b8c-q9z7m", "no_fit")
    ]
    assert h.backend.calls == []
