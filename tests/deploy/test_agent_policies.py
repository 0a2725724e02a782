"""The admission policies in deploy/daemonset.yaml, on the real API server: an agent's
token bound to node A writes A's NodeMetric and records Events as A, nothing else;
other identities are unaffected."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from agent import health, reporter
from kube import cache, events, rest, slo
from metriccache import MetricCache
from testbed import controlplane, localcluster
from tests.agent import clusterkit
from tests.waiting import eventually

pytestmark = pytest.mark.controlplane

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NAMESPACE = "nodeqos-system"
PATH = cache.NODEMETRICS.path()


class WallClock:
    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


@pytest.fixture(scope="module")
def nodes(control_plane: controlplane.ControlPlane, kube: rest.Rest) -> Iterator[tuple[str, str]]:
    """Two fresh nodes, and the agent's and descheduler's manifests applied for real
    (and enforced: every test starts with the admission policies in force)."""
    for name in ("daemonset.yaml", "descheduler.yaml"):
        for doc in yaml.safe_load_all((DEPLOY / name).read_text()):
            if doc and doc["kind"] not in ("DaemonSet", "Deployment", "ConfigMap"):
                localcluster.apply(kube, doc)
    suffix = uuid.uuid4().hex[:6]
    pair = (f"n1-{suffix}", f"n2-{suffix}")
    for node in pair:
        localcluster.register_node(kube, node)
    wait_enforced(control_plane, kube, pair[0])
    yield pair
    for node in pair:
        for path in (cache.NODEMETRICS.path(node), rest.object_path("", "v1", "nodes", node)):
            try:
                kube.delete(path)
            except rest.ApiError as err:
                if not err.not_found:
                    raise


def as_identity(identity: controlplane.Identity) -> rest.Rest:
    return rest.Rest.from_kubeconfig(identity.kubeconfig, qps=0)


def agent_reporter(client: rest.Rest, node: str) -> reporter.Reporter:
    """The agent's real NodeMetric reporter for `node`, talking as `client`."""

    class NoCopy:
        nodemetric_synced = False

        def nodemetric(self) -> None:
            return None

    readiness = health.Readiness()
    return reporter.Reporter(
        client,
        node,
        MetricCache(clock=time.time),
        pods=dict,
        informer=NoCopy(),
        metrics=reporter.ReporterMetrics(CollectorRegistry()),
        ready=readiness.register("reporter", "no report yet"),
        clock=WallClock(),
    )


def wait_enforced(control_plane: controlplane.ControlPlane, kube: rest.Rest, node: str) -> None:
    """The API server enforces a new policy once its policy informer has it: probe with a
    NodeMetric named after no node until the agent's create of it is refused. A probe that
    gets through first is deleted, so no test sees a write made before enforcement."""
    agent = as_identity(control_plane.service_account(NAMESPACE, "nodeqos-agent", node=node))
    probe = f"probe-{uuid.uuid4().hex[:6]}"
    deadline = time.monotonic() + 30
    while True:
        try:
            agent.create(PATH, slo.NodeMetric.for_node(probe).to_api())
        except rest.ApiError as err:
            if err.status == 403:
                return
            raise
        kube.delete(cache.NODEMETRICS.path(probe))
        assert time.monotonic() < deadline, "the admission policy was not enforced within 30 s"
        time.sleep(0.2)


def refused(write: Any) -> rest.ApiError:
    """The error `write` raises (the policies are in force: see `nodes`)."""
    with pytest.raises(rest.ApiError) as caught:
        write()
    return caught.value


def test_the_agent_of_a_node_writes_only_that_nodes_nodemetric(
    control_plane: controlplane.ControlPlane, kube: rest.Rest, nodes: tuple[str, str]
) -> None:
    """Bound to n1: creates and updates n1's NodeMetric; n2's is refused with a clear 403."""
    n1, n2 = nodes
    kube.create(PATH, {**slo.NodeMetric.for_node(n2).to_api(), "status": None})
    agent = as_identity(control_plane.service_account(NAMESPACE, "nodeqos-agent", node=n1))

    foreign = kube.get(cache.NODEMETRICS.path(n2))
    refusal = refused(
        lambda: agent.replace(
            cache.NODEMETRICS.path(n2, subresource="status"),
            {**foreign, "status": {"updateTime": localcluster.now_rfc3339()}},
        )
    )
    assert refusal.status == 403
    assert f"nodeqos-agent on node {n1} may write only NodeMetric {n1}, not {n2}" in str(refusal)

    with pytest.raises(rest.ApiError) as created:
        agent.create(PATH, slo.NodeMetric.for_node(f"{n2}-new").to_api())
    assert created.value.status == 403
    assert f"not {n2}-new" in str(created.value)

    mine = agent_reporter(agent, n1).report()
    assert mine.result is reporter.Result.SUCCESS, mine.detail
    assert kube.get(cache.NODEMETRICS.path(n1))["status"]["updateTime"]

    forged = agent_reporter(agent, n2).report()
    assert forged.result is reporter.Result.ERROR
    assert f"may write only NodeMetric {n1}, not {n2}" in forged.detail
    assert "updateTime" not in (kube.get(cache.NODEMETRICS.path(n2)).get("status") or {})


def test_a_token_bound_to_no_node_writes_no_nodemetric(
    control_plane: controlplane.ControlPlane, kube: rest.Rest, nodes: tuple[str, str]
) -> None:
    """A Secret-style token (no node in it) is refused, and the message says which token to use."""
    n1, _ = nodes
    agent = as_identity(control_plane.service_account(NAMESPACE, "nodeqos-agent", create=False))
    refusal = refused(lambda: agent.create(PATH, slo.NodeMetric.for_node(f"{n1}-unbound").to_api()))
    assert refusal.status == 403
    assert "this token is bound to no node" in str(refusal)


def test_the_descheduler_and_other_writers_are_unaffected(
    control_plane: controlplane.ControlPlane, kube: rest.Rest, nodes: tuple[str, str]
) -> None:
    """The descheduler still lists every NodeMetric; an admin still writes any of them."""
    n1, n2 = nodes
    agent = as_identity(control_plane.service_account(NAMESPACE, "nodeqos-agent", node=n1))
    assert agent_reporter(agent, n1).report().result is reporter.Result.SUCCESS
    descheduler = as_identity(
        control_plane.service_account(NAMESPACE, "nodeqos-descheduler", create=False)
    )
    listed = {item["metadata"]["name"] for item in descheduler.get(PATH)["items"]}
    assert n1 in listed
    # The policy matches the agent only: another tool (here the admin) writes n2's.
    body = slo.NodeMetric.for_node(n2).to_api()
    try:
        kube.create(PATH, {**body, "status": None})
    except rest.ApiError as err:
        assert err.conflict
    current = kube.get(cache.NODEMETRICS.path(n2))
    kube.replace(
        cache.NODEMETRICS.path(n2, subresource="status"),
        {**current, "status": {"updateTime": localcluster.now_rfc3339()}},
    )


def test_the_agent_records_events_only_as_its_own_node(
    control_plane: controlplane.ControlPlane, kube: rest.Rest, nodes: tuple[str, str]
) -> None:
    """Bound to n1: Events from host n1 are recorded; Events claiming host n2 are refused."""
    n1, n2 = nodes
    agent = as_identity(control_plane.service_account(NAMESPACE, "nodeqos-agent", node=n1))
    pod = events.ObjectRef(kind="Pod", namespace="default", name="web-0", uid="u-1")
    forged = events.Recorder(agent, "nodeqos-agent", n2)
    deadline = time.monotonic() + 20
    while forged.event(pod, "Normal", "Evicted", "forged"):
        assert time.monotonic() < deadline, "the admission policy never refused the Event"
        time.sleep(0.2)
    assert events.Recorder(agent, "nodeqos-agent", n1).event(pod, "Normal", "Evicted", "mine")
    with pytest.raises(rest.ApiError) as refused:
        agent.create(
            rest.object_path("", "v1", "events", namespace="default"),
            {
                "metadata": {"generateName": "forged-"},
                "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web-0"},
                "reason": "Evicted",
                "source": {"component": "nodeqos-agent", "host": n2},
                "reportingComponent": "nodeqos-agent",
                "reportingInstance": n2,
            },
        )
    assert refused.value.status == 403
    assert f"nodeqos-agent on node {n1} may record Events only with source.host" in str(
        refused.value
    )


def test_the_agent_process_runs_on_exactly_the_shipped_rights(
    control_plane: controlplane.ControlPlane,
    kube: rest.Rest,
    nodes: tuple[str, str],
    tmp_path: Path,
) -> None:
    """`python -m agent` with n1's bound token and the ClusterRole only: ready, publishing."""
    n1, _ = nodes
    identity = control_plane.service_account(NAMESPACE, "nodeqos-agent", node=n1)
    live = clusterkit.LiveNode(tmp_path, node_cpu=1.0)
    with clusterkit.AgentProcess(tmp_path, identity.kubeconfig, live, n1) as agent:
        before = ((clusterkit.nodemetric(kube, n1) or {}).get("status") or {}).get("updateTime")
        clusterkit.wait_for_report(kube, n1, after=before, timeout=40)
        code, body = eventually(
            lambda: (got := agent.get("/healthz"))[0] == 200 and got, "/healthz 200", 30
        )
        assert agent.terminate() == 0, agent.log()[-3000:]
    assert code == 200, body
    assert "forbidden" not in agent.log().lower(), agent.log()[-3000:]
