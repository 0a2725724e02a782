"""Restarts on the real nodes (issue 15, test 5), with deploy/ installed as
tests/e2e/test_deploy.py installs it (the same module-scoped fixture, so the
same overlay: one metric-cache directory per node under a temporary hostPath):

- a deleted agent pod is recreated by its DaemonSet, becomes Ready, and the
  NodeMetric its successor publishes still counts samples the killed agent
  collected: the metric cache on the host outlived the pod;
- a deleted descheduler leader hands its Lease, within leaseDuration +
  renewDeadline, to a live replica (the survivor, or the Deployment's
  replacement pod if that asks first after the release); the other is a Ready
  follower, and the Lease, watched throughout, changes hands once and never
  without a release or an expiry in between.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from descheduler import config, plugins
from kube import quantity, rest, slo
from tests.e2e import pods, test_deploy
from tests.e2e.conftest import RealCluster
from tests.e2e.test_deploy import NAMESPACE, describe, ready, wait_or_describe

# deploy/ applied once for this module, exactly as test_deploy applies it; the
# manifests only, not the chart too: tests/deploy/test_chart.py holds the chart
# to rendering the same objects, and a second install would double the time.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.controlplane,
    pytest.mark.slow,
    pytest.mark.parametrize("installed", ["manifests"], indirect=True),
]
installed = test_deploy.installed

NODE = "n1"
AGENT_PORT = 9316
DESCHEDULER_PORT = 10258
AGENTS = "app.kubernetes.io/name=nodeqos-agent"
DESCHEDULERS = "app.kubernetes.io/name=nodeqos-descheduler"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
# Collection rounds (one a second) the killed agent must have made of the busy pod.
BUSY_ROUNDS = 15
# The busy pod's average the successor must still publish. Counting the samples
# the killed agent took (BUSY_ROUNDS at up to 500m, diluted by at most a few
# dozen idle ones) gives well over this; a fresh cache has only idle samples (~0m).
MIN_REMEMBERED_MILLICORES = 50


def _scrape(url: str, name: str) -> float | None:
    """The value of the unlabelled sample `name` at `url`, None while it does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[-1])
    return None


def _agents(kube: rest.Rest) -> dict[str, dict[str, Any]]:
    """The agent pods by node, leaving out any being deleted (a node has at most one
    other) and a replacement kube-scheduler has not bound yet (no nodeName)."""
    return {
        p["spec"]["nodeName"]: p
        for p in kube.get(PODS, labelSelector=AGENTS)["items"]
        if p["metadata"].get("deletionTimestamp") is None and p["spec"].get("nodeName")
    }


def _state_dir(kube: rest.Rest) -> Path:
    """The host directory the installed agent DaemonSet keeps its metric caches
    under, as the API server holds it (whichever way it was installed)."""
    (daemonset,) = kube.get(
        f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets", labelSelector=AGENTS
    )["items"]
    (state,) = (v for v in daemonset["spec"]["template"]["spec"]["volumes"] if v["name"] == "state")
    return Path(state["hostPath"]["path"])


def _descheduler_config(kube: rest.Rest) -> str:
    """The installed descheduler's configuration file, as the API server holds it."""
    (text,) = (
        str(c["data"]["descheduler.yaml"])
        for c in kube.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps")["items"]
        if "descheduler.yaml" in (c.get("data") or {})
    )
    return text


def _busy_until(name: str, signal_dir: Path) -> dict[str, Any]:
    """A 500m pod on NODE that burns CPU until `signal_dir/stop` exists, then sleeps."""
    body = pods.pod(
        name,
        node=NODE,
        cpu="500m",
        command="while [ ! -e /signal/stop ]; do :; done; exec sleep 100000",
    )
    spec = body["spec"]
    spec["volumes"] = [{"name": "signal", "hostPath": {"path": str(signal_dir)}}]
    spec["containers"][0]["volumeMounts"] = [{"name": "signal", "mountPath": "/signal"}]
    return body


def _started(pod: dict[str, Any]) -> datetime:
    (status,) = pod["status"]["containerStatuses"]
    return datetime.fromisoformat(status["state"]["running"]["startedAt"])


def test_killed_agent_is_recreated_and_its_successor_still_counts_its_samples(
    real_cluster: RealCluster,
    installed: str,
    e2e_namespace: str,
    tmp_path: Path,
) -> None:
    """The successor's NodeMetric averages in the busy samples the killed agent took.

    The pod burns CPU only while the killed agent runs, so its podsMetric usage
    (the average over aggregateDurationSeconds, 300 s) stays well above zero
    after the restart only if that agent's samples survived in the cache.
    """
    kube = real_cluster.kube
    nodes = set(real_cluster.nodes)
    kube.create(f"/api/v1/namespaces/{e2e_namespace}/pods", _busy_until("busy", tmp_path))
    before = wait_or_describe(
        kube,
        lambda: (
            (found := {n: p for n, p in _agents(kube).items() if ready(p)}).keys() == nodes
            and found
        ),
        "a Ready agent on every node",
    )
    (busy,) = pods.wait_running(kube, e2e_namespace, ["busy"])

    # One cache per node, each in its own directory: three agents on one host
    # must not share (and corrupt) one file.
    state = _state_dir(kube)
    pods.wait_for(
        lambda: all((state / n / "metriccache.db").is_file() for n in nodes),
        f"a metric cache per node under {state}",
    )
    assert not (state / "metriccache.db").exists(), sorted(p.name for p in state.iterdir())

    killed = before[NODE]
    rounds_url = f"http://{killed['status']['podIP']}:{AGENT_PORT}/metrics"
    rounds = "nodeqos_agent_collect_rounds_total"
    (start,) = pods.wait_for(
        lambda: (value := _scrape(rounds_url, rounds)) is not None and (value,),
        f"{NODE}'s agent to answer",
    )
    pods.wait_for(
        lambda: (_scrape(rounds_url, rounds) or 0) >= start + BUSY_ROUNDS,
        f"{BUSY_ROUNDS} collection rounds of the busy pod on {NODE}",
    )
    (tmp_path / "stop").touch()
    kube.delete(f"{PODS}/{killed['metadata']['name']}")

    def successor() -> dict[str, Any] | None:
        found = _agents(kube)
        new = found.get(NODE)
        return (
            new
            if new and new["metadata"]["uid"] != killed["metadata"]["uid"] and ready(new)
            else None
        )

    deleted_at = time.monotonic()
    new = wait_or_describe(kube, successor, f"a new Ready agent on {NODE}", timeout=120)
    recreated = time.monotonic() - deleted_at
    others = {n: p["metadata"]["uid"] for n, p in _agents(kube).items() if n != NODE}
    assert others == {n: p["metadata"]["uid"] for n, p in before.items() if n != NODE}

    def successors_report() -> tuple[dict[str, Any], dict[str, str]] | None:
        """The new agent's report, once it lists the busy pod (its informer may not
        have listed the node's pods in time for the first)."""
        status = kube.get(f"/apis/{slo.API_VERSION}/nodemetrics/{NODE}").get("status") or {}
        updated = status.get("updateTime")
        if not updated or datetime.fromisoformat(updated) < _started(new):
            return None
        for pod in status.get("podsMetric") or ():
            if (pod["namespace"], pod["name"]) == (e2e_namespace, busy["metadata"]["name"]):
                return status, pod["podUsage"]["resources"]
        return None

    status, remembered = pods.wait_for(
        successors_report, f"the new agent's NodeMetric for {NODE} listing the busy pod", timeout=90
    )
    millicores = quantity.cpu_millis(remembered["cpu"])
    print(
        f"agent on {NODE} recreated and Ready {recreated:.1f}s after the delete; remembers {millicores}m"
    )
    assert millicores >= MIN_REMEMBERED_MILLICORES, (
        f"cold start: the new agent reports {millicores}m for a pod that burned CPU only "
        f"before the restart (recreated and Ready in {recreated:.0f}s); the killed agent's "
        f"samples were lost: {status}"
    )


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """One state of the Lease as the watch delivered it."""

    holder: str
    renewed: datetime | None
    acquired: datetime | None
    duration: int
    transitions: int

    @classmethod
    def of(cls, lease: dict[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}

        def when(key: str) -> datetime | None:
            value = spec.get(key)
            return datetime.fromisoformat(value) if value else None

        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            renewed=when("renewTime"),
            acquired=when("acquireTime"),
            duration=int(spec.get("leaseDurationSeconds") or 0),
            transitions=int(spec.get("leaseTransitions") or 0),
        )


@contextlib.contextmanager
def watching(kube: rest.Rest, lease_path: str) -> Iterator[list[LeaseRecord]]:
    """Every state of the Lease at `lease_path` from now on, appended by a watch thread."""
    lease = kube.get(lease_path)
    collection, name = lease_path.rsplit("/", 1)
    records = [LeaseRecord.of(lease)]
    failures: list[BaseException] = []
    responses: list[Any] = []
    stopping = threading.Event()
    query: dict[str, str | int | bool] = {
        "watch": True,
        "fieldSelector": f"metadata.name={name}",
        "resourceVersion": lease["metadata"]["resourceVersion"],
        "timeoutSeconds": 600,
    }

    def run() -> None:
        try:
            for line in kube.stream_lines(
                collection, query, read_timeout=630, opened=responses.append
            ):
                event = json.loads(line)
                if event["type"] == "ERROR":
                    raise AssertionError(f"the Lease watch ended: {event['object']}")
                records.append(LeaseRecord.of(event["object"]))
        except rest.ApiUnavailable as err:
            if not stopping.is_set():
                failures.append(err)
        except Exception as err:  # handed to the test, which fails with it
            failures.append(err)

    thread = threading.Thread(target=run, name="lease-watch", daemon=True)
    thread.start()
    try:
        yield records
    finally:
        stopping.set()
        for response in responses:
            response.shutdown()
        thread.join(10)
    if failures:
        raise AssertionError("the Lease watch failed") from failures[0]


@dataclass(frozen=True, slots=True)
class Handover:
    """The Lease passing from one holder to another."""

    last: LeaseRecord  # the old holder's last record
    first: LeaseRecord  # the new holder's first record
    released: bool  # whether an empty holder came in between

    @property
    def safe(self) -> bool:
        """Taken over only once the old holder had let go: released, or not renewed
        for its whole leaseDurationSeconds (both clocks are this host's)."""
        if self.released:
            return True
        if self.last.renewed is None or self.first.acquired is None:
            return False
        return (self.first.acquired - self.last.renewed).total_seconds() >= self.last.duration


def handovers(records: list[LeaseRecord]) -> list[Handover]:
    """Every change from one non-empty holder to another, in order."""
    found = []
    last_held: LeaseRecord | None = None
    released = False
    for record in records:
        if not record.holder:
            released = True
            continue
        if last_held is not None and record.holder != last_held.holder:
            found.append(Handover(last_held, record, released))
        last_held, released = record, False
    return found


def _history(records: list[LeaseRecord]) -> str:
    """The Lease's states as watched, one a line, for a failure message."""
    return "\n".join(
        f"holder={r.holder or '-'} renewed={r.renewed} acquired={r.acquired} "
        f"duration={r.duration} transitions={r.transitions}"
        for r in records
    )


def _leader_gauge(pod: dict[str, Any]) -> float | None:
    return _scrape(
        f"http://{pod['status']['podIP']}:{DESCHEDULER_PORT}/metrics", "nodeqos_descheduler_leader"
    )


def test_killed_descheduler_leader_hands_the_lease_over(
    real_cluster: RealCluster, installed: str
) -> None:
    """A live replica takes the Lease in time, the other follows; one holder at a time."""
    kube = real_cluster.kube
    shipped = config.load_config(
        _descheduler_config(kube), plugins=plugins.registry().catalog()
    ).leader_election
    bound = (shipped.lease_duration + shipped.renew_deadline).total_seconds()
    lease_path = rest.object_path(
        "coordination.k8s.io",
        "v1",
        "leases",
        shipped.resource_name,
        namespace=shipped.resource_namespace,
    )

    def replicas() -> dict[str, dict[str, Any]] | None:
        """The Deployment's pods by name once there are two, both Ready: none of
        them not yet Ready, failed, or on its way out (each may still campaign)."""
        live = [
            p
            for p in kube.get(PODS, labelSelector=DESCHEDULERS)["items"]
            if p["metadata"].get("deletionTimestamp") is None
            and p["status"].get("phase") not in ("Succeeded", "Failed")
        ]
        if len(live) != 2 or not all(ready(p) for p in live):
            return None
        return {p["metadata"]["name"]: p for p in live}

    def holder() -> str:
        try:
            return LeaseRecord.of(kube.get(lease_path)).holder
        except rest.ApiError as err:
            if err.not_found:
                return ""
            raise

    def settled() -> tuple[dict[str, dict[str, Any]], str] | None:
        found, leader = replicas(), holder()
        # The identity is <hostname>_<pid>_<random>, and a pod's hostname is its name.
        return (found, leader) if found and leader.split("_")[0] in found else None

    before, old_holder = wait_or_describe(
        kube, settled, "two Ready replicas, one holding the Lease"
    )
    old_pod = old_holder.split("_")[0]
    (survivor,) = set(before) - {old_pod}

    with watching(kube, lease_path) as records:
        kube.delete(f"{PODS}/{old_pod}")
        deleted_at = time.monotonic()
        try:
            new_holder = pods.wait_for(
                lambda: (h := holder()) not in ("", old_holder) and h,
                "another replica to take the Lease",
                timeout=bound + 30,
                interval=0.2,
            )
        except AssertionError as err:
            raise AssertionError(f"{err}\n{_history(records)}\n{describe(kube)}") from None
        moved = time.monotonic() - deleted_at
        after = wait_or_describe(
            kube,
            lambda: (found := replicas()) and set(found) != set(before) and found,
            "the Deployment's replacement replica Ready",
        )
        (replacement,) = set(after) - set(before)
        # The old leader releases the Lease on SIGTERM, so whichever live replica asks
        # first takes it: the survivor, or a replacement that started within the
        # survivor's retryPeriod (seen on a fresh clone). Either is a correct handover.
        new_pod = new_holder.split("_")[0]
        assert new_pod in (survivor, replacement), (
            f"the Lease went to {new_holder}, not to a live replica "
            f"({survivor}, {replacement})\n{_history(records)}\n{describe(kube)}"
        )
        gauges = pods.wait_for(
            lambda: (
                None not in (g := {n: _leader_gauge(p) for n, p in after.items()}).values() and g
            ),
            "both replicas' /metrics",
        )
        final_holder = holder()

    print(f"Lease moved {moved:.1f}s after the delete (bound {bound:.0f}s); {len(records)} records")
    assert moved <= bound, f"the Lease moved {moved:.1f}s after the delete, over {bound:.0f}s"
    assert final_holder == new_holder, (final_holder, new_holder)
    assert gauges == {n: float(n == new_pod) for n in after}, gauges
    # One holder at a time: the Lease changed hands once, from the deleted pod to
    # the new holder, and only after the old holder released it (an empty holder)
    # or its lease ran out unrenewed.
    changes = handovers(records)
    history = _history(records)
    assert [(h.last.holder, h.first.holder) for h in changes] == [(old_holder, new_holder)], history
    (handover,) = changes
    assert handover.safe, history
    assert handover.first.transitions == handover.last.transitions + 1, history
