"""RemovePodsViolatingInterPodAntiAffinity through the runner: domains, namespaces,
which of two violators goes, and that the other then stays."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from descheduler import framework, plugins
from descheduler.plugins import removepodsviolatinginterpodantiaffinity as plugin
from descheduler.plugins.removepodsviolatinginterpodantiaffinity import antiaffinity
from kube import eviction, objects
from kube.classify import KubeQOS
from tests import builders
from tests.descheduler import fakes

FIXTURE = Path(__file__).parents[1] / "fixtures" / "descheduler" / "snapshot-deschedule.yaml"
NAME = plugin.NAME
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
OLDER = builders.T0
NEWER = builders.T0 + timedelta(hours=1)
NO_EVICTION = {"descheduler.alpha.kubernetes.io/prefer-no-eviction": ""}
node = builders.make_node


def run(
    args: dict[str, Any],
    pods: list[objects.Pod],
    nodes: list[objects.Node] | None = None,
    *,
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    backend: fakes.FakeBackend | None = None,
    **top: Any,
) -> framework.CycleReport:
    """One cycle of a profile running only this plugin (and DefaultEvictor)."""
    return fakes.run_plugin(
        NAME, args, pods, nodes=nodes, namespaces=namespaces, backend=backend, **top
    )


outcome = fakes.outcome


def anti(app: str, key: str = HOSTNAME, **term: Any) -> dict[str, Any]:
    """A required anti-affinity against pods labelled app=`app` in the `key` domain."""
    rule = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key, **term}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [rule]}}


def web(name: str, **overrides: Any) -> objects.Pod:
    """A pod labelled app=web that refuses to share its node with another app=web pod."""
    overrides.setdefault("labels", {"app": "web"})
    overrides.setdefault("affinity", anti("web"))
    return builders.make_pod(name, **overrides)


ORDER_CASES = [
    pytest.param(web("a", created=OLDER), web("b", created=NEWER), "b", id="newer-goes"),
    pytest.param(
        web("a", priority=10, created=NEWER), web("b", created=OLDER), "b", id="lower-priority-goes"
    ),
    pytest.param(web("a", priority=0), web("b", priority=None), "b", id="no-priority-goes-first"),
    pytest.param(
        web("a", created=NEWER),
        web("b", qos=KubeQOS.BEST_EFFORT, created=OLDER),
        "b",
        id="best-effort-before-burstable",
    ),
    pytest.param(
        web("a", qos=KubeQOS.GUARANTEED),
        web("b", created=OLDER),
        "b",
        id="burstable-before-guaranteed",
    ),
    pytest.param(
        web("a", annotations=NO_EVICTION, created=NEWER),
        web("b", created=OLDER),
        "b",
        id="prefer-no-eviction-last",
    ),
    pytest.param(web("b"), web("a"), "a", id="ties-by-name"),
]


@pytest.mark.parametrize(("first", "second", "goes"), ORDER_CASES)
def test_one_of_two_mutual_violators_goes(
    first: objects.Pod, second: objects.Pod, goes: str
) -> None:
    """Two pods that violate each other: the first in eviction order goes, the other stays."""
    assert outcome(run({}, [first, second])) == ([f"default/{goes}"], [])


def test_three_mutual_violators_leave_one() -> None:
    """The violation is checked again before each attempt: two of three go, the last stays."""
    pods = [web("a", priority=3), web("b", priority=1), web("c", priority=2)]
    assert outcome(run({}, pods)) == (["default/b", "default/c"], [])


DOMAIN_CASES = [
    pytest.param(HOSTNAME, "n2", [node("n1"), node("n2")], [], id="other-host"),
    pytest.param(
        ZONE,
        "n2",
        [node("n1", labels={ZONE: "z1"}), node("n2", labels={ZONE: "z1"})],
        ["default/b"],
        id="same-zone",
    ),
    pytest.param(
        ZONE,
        "n2",
        [node("n1", labels={ZONE: "z1"}), node("n2", labels={ZONE: "z2"})],
        [],
        id="other-zone",
    ),
    pytest.param(ZONE, "n1", [node("n1"), node("n2")], [], id="node-without-the-key"),
]


@pytest.mark.parametrize(("key", "second_node", "nodes", "evicted"), DOMAIN_CASES)
def test_topology_domain(
    key: str, second_node: str, nodes: list[objects.Node], evicted: list[str]
) -> None:
    """A violation needs both nodes to carry the topology key with the same value."""
    pods = [
        web("a", node="n1", affinity=anti("web", key), created=OLDER),
        web("b", node=second_node, affinity=anti("web", key), created=NEWER),
    ]
    assert outcome(run({}, pods, nodes)) == (evicted, [])


NAMESPACES = {"a": {"team": "x"}, "b": {"team": "y"}, "c": {"team": "x"}}


@pytest.mark.parametrize(
    ("term", "evicted"),
    [
        pytest.param({}, [], id="own-namespace-only"),
        pytest.param({"namespaces": ["b"]}, ["a/p"], id="listed-namespace"),
        pytest.param({"namespaces": ["c"]}, [], id="other-listed-namespace"),
        pytest.param({"namespaceSelector": {}}, ["a/p"], id="empty-selector-is-all"),
        pytest.param(
            {"namespaceSelector": {"matchLabels": {"team": "y"}}}, ["a/p"], id="selector-matches"
        ),
        pytest.param(
            {"namespaceSelector": {"matchLabels": {"team": "x"}}}, [], id="selector-misses"
        ),
    ],
)
def test_term_namespaces(term: dict[str, Any], evicted: list[str]) -> None:
    """The term looks at its namespaces and namespaceSelector, else the pod's own namespace."""
    pods = [
        builders.make_pod("p", namespace="a", affinity=anti("db", **term)),
        builders.make_pod("q", namespace="b", labels={"app": "db"}),
    ]
    assert outcome(run({}, pods, namespaces=NAMESPACES)) == (evicted, [])


def test_only_the_pod_with_the_term_is_a_candidate() -> None:
    """The offender without a term of its own stays, whatever its priority."""
    pods = [
        builders.make_pod("a", affinity=anti("db"), priority=100),
        builders.make_pod("b", labels={"app": "db"}, priority=0),
    ]
    assert outcome(run({}, pods)) == (["default/a"], [])


def test_out_of_scope_offenders_count() -> None:
    """namespaces limits who may be evicted, not who can break the rule."""
    pods = [
        builders.make_pod("p", namespace="a", affinity=anti("db", namespaces=["b"])),
        builders.make_pod("q", namespace="b", labels={"app": "db"}),
    ]
    assert outcome(run({"namespaces": {"include": ["a"]}}, pods)) == (["a/p"], [])


@pytest.mark.parametrize(
    ("scope", "evicted"),
    [
        pytest.param({"namespaces": {"exclude": ["a"]}}, ["b/q"], id="namespaces-exclude"),
        pytest.param(
            {"labelSelector": {"matchLabels": {"tier": "2"}}}, ["b/q"], id="label-selector"
        ),
    ],
)
def test_scope(scope: dict[str, Any], evicted: list[str]) -> None:
    """A violator out of scope is not evicted; its in-scope partner is."""
    pods = [
        web("p", namespace="a", affinity=anti("web", namespaces=["a", "b"]), priority=0),
        web(
            "q",
            namespace="b",
            labels={"app": "web", "tier": "2"},
            affinity=anti("web", namespaces=["a", "b"]),
            priority=5,
        ),
    ]
    assert outcome(run(scope, pods)) == (evicted, [])


def test_filtered_violator_leaves_its_partner_to_go() -> None:
    """The first in order is a DaemonSet pod (filtered): the other violator goes instead."""
    pods = [web("a", owner="DaemonSet", priority=0), web("b", priority=5)]
    assert outcome(run({}, pods)) == (["default/b"], [("default/a", "filtered")])


def test_pdb_refusal_leaves_its_partner_to_go() -> None:
    """The API refuses the first (a PDB): it stays, so its partner still violates and goes."""
    backend = fakes.FakeBackend(outcomes={"a": eviction.Outcome.PDB_BLOCKED})
    pods = [web("a", priority=0), web("b", priority=5)]
    report = run({}, pods, backend=backend)
    assert outcome(report) == (["default/b"], [("default/a", "pdb_blocked")])
    assert backend.calls == ["default/a", "default/b"]


def test_terminal_pods_do_not_violate() -> None:
    """A Succeeded or Failed pod on the node is no offender."""
    pods = [web("a"), web("b", phase="Succeeded"), web("c", phase="Failed")]
    assert outcome(run({}, pods)) == ([], [])


def test_limit_reached_for_each_remaining_violator() -> None:
    """maxNoOfPodsToEvictTotal 1 with two pairs: one goes, both of the other pair say why."""
    pods = [
        web("a", node="n1", priority=0),
        web("b", node="n1", priority=5),
        web("c", node="n2", priority=1),
        web("d", node="n2", priority=6),
    ]
    report = run({}, pods, maxNoOfPodsToEvictTotal=1)
    assert outcome(report) == (
        ["default/a"],
        [("default/c", "limit_reached"), ("default/d", "limit_reached")],
    )


def test_eviction_reason_names_the_offender() -> None:
    """The reason names the pod that breaks the term and where it runs."""
    report = run({}, [web("a", created=OLDER), web("b", created=NEWER)])
    [evicted] = report.evictions
    assert evicted.reason == (
        "pod default/a on node n1 breaks its required anti-affinity "
        "(topologyKey kubernetes.io/hostname)"
    )


def test_eviction_key_is_total() -> None:
    """Pods equal in every ranked field still order by namespace, name and UID."""
    pods = [web("b", uid="2"), web("a", uid="9"), web("a", namespace="x", uid="1")]
    assert [p.key for p in sorted(pods, key=antiaffinity.eviction_key)] == [
        "default/a",
        "default/b",
        "x/a",
    ]


def test_snapshot_fixture() -> None:
    """The simulate fixture: of the two front pods sharing node-c, the newer goes."""
    items = yaml.safe_load(FIXTURE.read_text())["items"]
    profile = {"name": "p1", "plugins": {"deschedule": {"enabled": [NAME]}}}
    h = fakes.harness(
        fakes.policy(profiles=[profile], dryRun=True),
        plugins.registry(),
        framework.StaticSource.from_objects(items),
    )
    report = h.runner.run_once()
    assert report.evicted_pods == ["shop/front-5c4d-p4w9z"]
    assert report.skipped == ()
    assert h.backend.calls == []
