"""ClusterColocationProfiles through both paths on the real API server: MutatingAdmissionPolicy
(`policy`) and the manager's `/profiles` webhook (`webhook`), on a server that does not serve
MutatingAdmissionPolicy v1 (`--runtime-config=...mutatingadmissionpolicies=false`, as 1.34-1.35
by default). The profile rows run through both, and the same pod comes out.

`served(kube, path, tmp_path)` runs the real ProfileController and webhook server for either
path against any Rest client (reused for other API server versions)."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kube import events, quantity, rest
from manager import daemon, probability, profilecontroller, profilemutation, telemetry
from testbed import controlplane
from tests.manager.test_colocationprofile_controlplane import PROFILES, _pod
from tests.manager.test_reconcile_controlplane import eventually

pytestmark = pytest.mark.controlplane

PCS = "/apis/scheduling.k8s.io/v1/priorityclasses"
MAP_OFF = (
    "--runtime-config=admissionregistration.k8s.io/v1/mutatingadmissionpolicies=false",
    # its admission plugin lists the resource and the server never gets ready without it;
    # this flag replaces testbed's own (ServiceAccount off), so it says both
    "--disable-admission-plugins=MutatingAdmissionPolicy,ServiceAccount",
)
CONFIG = profilecontroller.WEBHOOKS.path(profilemutation.CONFIGURATION)


@pytest.fixture(scope="module")
def map_off() -> Iterator[rest.Rest]:
    """A control plane of this module's own whose API server does not serve MAP v1."""
    with controlplane.ControlPlane(controlplane.find_binaries(), apiserver_args=MAP_OFF) as plane:
        yield rest.Rest(rest.api_client(plane.kubeconfig), qps=0)


@pytest.fixture(params=["policy", "webhook"])
def path_and_kube(request: pytest.FixtureRequest, kube: rest.Rest) -> tuple[str, rest.Rest]:
    """`policy` on the session's server (MAP served); `webhook` on the MAP-off server."""
    if request.param == "policy":
        return "policy", kube
    return "webhook", request.getfixturevalue("map_off")


@contextlib.contextmanager
def served(
    kube: rest.Rest,
    path: str,
    tmp_path: Path,
    *,
    discover: Callable[[], bool] | None = None,
    draw: Callable[[], int] | None = None,
    before_answer: Callable[[], None] = lambda: None,
    metrics: telemetry.Metrics | None = None,
) -> Iterator[tuple[profilecontroller.ProfileController, probability.Server, list[str]]]:
    """The profile controller (leader) on `path` and the manager's webhook server serving
    `/profiles` on 127.0.0.1; yields them and the outcomes the server recorded."""
    certificate = probability.make_certificate(tmp_path, ["127.0.0.1"])
    outcomes: list[str] = []
    holder: list[profilecontroller.ProfileController] = []
    server = probability.Server(
        ("127.0.0.1", 0),
        lambda name: holder[0].percent(name),
        certificate,
        profiles=lambda review: (before_answer(), holder[0].review(review, outcomes.append))[1],
    )
    webhook = profilecontroller.Webhook(
        {"url": f"https://127.0.0.1:{server.port}"}, certificate.ca_pem
    )
    extra: dict[str, Any] = {} if draw is None else {"draw": draw}
    controller = profilecontroller.ProfileController(
        kube,
        events.Recorder(kube, "nodeqos-manager"),
        webhook=webhook,
        profile_path=path,
        discover=discover,
        resync_seconds=1.0,
        metrics=metrics,
        **extra,
    )
    holder.append(controller)
    stop = threading.Event()
    server.start()
    controller.start()
    loop = threading.Thread(target=controller.run, args=(stop, lambda: True), daemon=True)
    loop.start()
    try:
        yield controller, server, outcomes
    finally:
        stop.set()
        loop.join(10)
        names = controller.profiles.keys()
        controller.stop()
        server.stop()
        # what the stopped controller kept: no webhook pointing at nothing, no policy left
        for gone in (
            CONFIG,
            *(profilecontroller.POLICIES.path(f"nodeqos-colocation-{n}") for n in names),
            *(profilecontroller.BINDINGS.path(f"nodeqos-colocation-{n}") for n in names),
        ):
            with contextlib.suppress(rest.ApiError):
                kube.delete(gone)


def install(kube: rest.Rest, cleanup: list[str], spec: dict[str, Any]) -> tuple[str, str]:
    """A namespace and a profile with `spec` scoped to it; (the profile's name, pods path)."""
    suffix = uuid.uuid4().hex[:8]
    namespace = f"paths-{suffix}"
    kube.create("/api/v1/namespaces", {"metadata": {"name": namespace, "labels": {"pp": suffix}}})
    cleanup.append(f"/api/v1/namespaces/{namespace}")
    name = f"pp-{suffix}"
    kube.create(
        PROFILES,
        {
            "apiVersion": "config.koordinator.sh/v1alpha1",
            "kind": "ClusterColocationProfile",
            "metadata": {"name": name},
            "spec": {"namespaceSelector": {"matchLabels": {"pp": suffix}}, **spec},
        },
    )
    cleanup.append(f"{PROFILES}/{name}")
    return name, f"/api/v1/namespaces/{namespace}/pods"


def in_force(kube: rest.Rest, pods: str, pod: dict[str, Any], label: str) -> None:
    """Dry-run `pod` until the path applies the profile (the pod comes back with `label`)."""
    deadline = time.monotonic() + 60
    while True:
        probe = kube.request("POST", pods, query={"dryRun": "All"}, body=pod)
        if label in (probe["metadata"].get("labels") or {}):
            return
        assert time.monotonic() < deadline, f"not applied within 60 s: {probe['metadata']}"
        time.sleep(0.5)


def _ints(section: dict[str, str]) -> dict[str, int]:
    return {k: quantity.quantity_value(v) for k, v in section.items()}


@pytest.fixture
def cleanup(path_and_kube: tuple[str, rest.Rest]) -> Iterator[list[str]]:
    paths: list[str] = []
    yield paths
    for path in reversed(paths):
        with contextlib.suppress(rest.ApiError):
            path_and_kube[1].delete(path)


def _everything(pod: dict[str, Any], pc: str) -> dict[str, Any]:
    c0, c1 = (c["resources"] for c in pod["spec"]["containers"])
    return {
        "labels": pod["metadata"]["labels"],
        "annotations": pod["metadata"].get("annotations"),
        "spec": {
            k: pod["spec"].get(k)
            for k in (
                "priorityClassName",
                "priority",
                "schedulerName",
                "preemptionPolicy",
                "nodeSelector",
            )
        },
        "tolerations": [t["key"] for t in pod["spec"].get("tolerations") or []],
        "env": [c.get("env") for c in pod["spec"]["containers"]],
        "c0": {s: _ints(v) for s, v in c0.items()},
        "c1": {s: _ints(v) for s, v in c1.items()},
    }


def test_every_field_comes_out_the_same_on_both_paths(
    path_and_kube: tuple[str, rest.Rest], cleanup: list[str], tmp_path: Path
) -> None:
    """Labels, annotations, key mappings, suffixes, QoS, priority (value and preemptionPolicy
    from the PriorityClass), scheduler, the patch, batch-cpu/memory: one expected pod for
    both paths; a pod outside the selector untouched; the Event names the path."""
    path, kube = path_and_kube
    suffix = uuid.uuid4().hex[:8]
    pc = f"koord-batch-{suffix}"
    kube.create(
        PCS,
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": pc},
            "value": 5500,
            "preemptionPolicy": "Never",
        },
    )
    cleanup.append(f"{PCS}/{pc}")
    toleration = {"key": "batch", "operator": "Exists", "effect": "NoSchedule"}
    name, pods = install(
        kube,
        cleanup,
        {
            "selector": {"matchLabels": {"app": "spark"}},
            "qosClass": "BE",
            "priorityClassName": pc,
            "koordinatorPriority": 1111,
            "schedulerName": "koord-scheduler",
            "labels": {"team": "data"},
            "annotations": {"colocated-by": "nodeqos"},
            "labelKeysMapping": {"app": "koordinator.sh/app", "team": "owner", "gone": "empty"},
            "annotationKeysMapping": {"note": "copied-note"},
            "labelSuffixes": {"owner": "-batch", "absent": "-x"},
            "patch": {
                "metadata": {"labels": {"patched": "yes"}},
                "spec": {
                    "nodeSelector": {"pool": "batch"},
                    "tolerations": [toleration],
                    "containers": [
                        {
                            "name": "c1",
                            "env": [{"name": "MODE", "value": "batch"}],
                            "resources": {"requests": {"cpu": "250m"}},
                        }
                    ],
                },
            },
        },
    )

    def spark(pod_name: str) -> dict[str, Any]:
        pod = _pod(pod_name, {"app": "spark"})
        pod["metadata"]["annotations"] = {"note": "hello"}
        pod["spec"]["nodeSelector"] = {"zone": "a"}
        pod["spec"]["tolerations"] = [{"key": "old", "operator": "Exists"}]
        return pod

    with served(kube, path, tmp_path) as (controller, _server, outcomes):
        assert controller.path == path
        in_force(kube, pods, spark("probe"), "koordinator.sh/qosClass")
        got = _everything(kube.create(pods, spark("spark")), pc)
        other = kube.create(pods, _pod("web", {"app": "web"}))
    assert got == {
        "labels": {
            "app": "spark",
            "team": "data",
            "koordinator.sh/app": "spark",
            "owner": "data-batch",
            "empty": "",
            "koordinator.sh/qosClass": "BE",
            "koordinator.sh/priority": "1111",
            "patched": "yes",
        },
        "annotations": {"note": "hello", "colocated-by": "nodeqos", "copied-note": "hello"},
        "spec": {
            "priorityClassName": pc,
            "priority": 5500,
            "schedulerName": "koord-scheduler",
            "preemptionPolicy": "Never",
            "nodeSelector": {"zone": "a", "pool": "batch"},
        },
        # DefaultTolerationSeconds appends its own after the replaced list
        "tolerations": ["batch", "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"],
        "env": [None, [{"name": "MODE", "value": "batch"}]],
        "c0": {
            "requests": {"kubernetes.io/batch-cpu": 500, "kubernetes.io/batch-memory": 1 << 30},
            "limits": {"kubernetes.io/batch-cpu": 1000, "kubernetes.io/batch-memory": 2 << 30},
        },
        "c1": {"requests": {"kubernetes.io/batch-cpu": 250}},
    }
    assert "koordinator.sh/qosClass" not in (other["metadata"].get("labels") or {})
    assert other["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "500m",
        "memory": "1Gi",
    }
    if path == "webhook":
        assert "mutated" in outcomes and "unchanged" in outcomes

    def reported() -> list[str]:
        items = kube.get(
            "/api/v1/namespaces/default/events",
            fieldSelector=f"involvedObject.name={name},reason={profilecontroller.PATH_REASON}",
        )["items"]
        return [e["message"].split(":")[0] for e in items]

    assert eventually(reported, "the ColocationProfilePath Event") == [f"path {path}"]


def test_a_mid_profile_rewrites_to_mid_on_both_paths(
    path_and_kube: tuple[str, rest.Rest], cleanup: list[str], tmp_path: Path
) -> None:
    """A koord-mid pod (label): every cpu/memory request and limit to kubernetes.io/mid-*."""
    path, kube = path_and_kube
    _name, pods = install(
        kube,
        cleanup,
        {
            "qosClass": "LS",
            "priorityClassName": "",
            "labels": {"koordinator.sh/priority-class": "koord-mid"},
        },
    )
    with served(kube, path, tmp_path):
        in_force(kube, pods, _pod("probe", {"app": "x"}), "koordinator.sh/qosClass")
        pod = kube.create(pods, _pod("mid", {"app": "x"}))
    c0, c1 = (c["resources"] for c in pod["spec"]["containers"])
    assert {s: _ints(v) for s, v in c0.items()} == {
        "requests": {"kubernetes.io/mid-cpu": 500, "kubernetes.io/mid-memory": 1 << 30},
        "limits": {"kubernetes.io/mid-cpu": 1000, "kubernetes.io/mid-memory": 2 << 30},
    }
    assert _ints(c1["requests"]) == {"kubernetes.io/mid-cpu": 1500}


def test_a_profile_neither_path_can_express_is_refused_the_same_way(
    path_and_kube: tuple[str, rest.Rest], cleanup: list[str], tmp_path: Path
) -> None:
    """A patch deleting a field (null): the same Warning Event, naming the field, on both
    paths; pods are created unmutated."""
    path, kube = path_and_kube
    name, pods = install(
        kube,
        cleanup,
        {"qosClass": "BE", "priorityClassName": "", "patch": {"spec": {"nodeSelector": None}}},
    )
    with served(kube, path, tmp_path):

        def refused() -> list[dict[str, Any]]:
            return list(
                kube.get(
                    "/api/v1/namespaces/default/events",
                    fieldSelector=f"involvedObject.name={name},"
                    f"reason={profilecontroller.INVALID_REASON}",
                )["items"]
            )

        (event,) = eventually(refused, "the ColocationProfileInvalid Event", timeout=30)
        pod = kube.create(pods, _pod("p", {"app": "x"}))
    assert "spec.patch.spec.nodeSelector: null (delete)" in event["message"]
    assert "koordinator.sh/qosClass" not in (pod["metadata"].get("labels") or {})


def test_discovery_says_which_servers_serve_the_policies(
    kube: rest.Rest, map_off: rest.Rest
) -> None:
    assert profilecontroller.serves_policies(kube) is True
    assert profilecontroller.serves_policies(map_off) is False


def test_webhook_down_pods_are_created_unmutated(map_off: rest.Rest, tmp_path: Path) -> None:
    """The manager's server stopped (a replica gone): failurePolicy Ignore, the pod is
    created without the profile, within the 3 s timeout; the leader's check of the webhook
    sets nodeqos_manager_profile_webhook_up to 0 and warns on the profile."""
    cleanup: list[str] = []
    registry = CollectorRegistry()
    metrics = telemetry.Metrics(registry)

    def up() -> float | None:
        return registry.get_sample_value("nodeqos_manager_profile_webhook_up")

    try:
        name, pods = install(map_off, cleanup, {"qosClass": "BE", "priorityClassName": ""})
        with served(map_off, "webhook", tmp_path, metrics=metrics) as (_c, server, _outcomes):
            in_force(map_off, pods, _pod("probe", {"app": "x"}), "koordinator.sh/qosClass")
            eventually(lambda: up() == 1, "profile_webhook_up 1")
            server.stop()
            started = time.monotonic()
            pod = map_off.create(pods, _pod("down", {"app": "x"}))
            took = time.monotonic() - started
            eventually(lambda: up() == 0, "profile_webhook_up 0")

            def warned() -> list[dict[str, Any]]:
                return list(
                    map_off.get(
                        "/api/v1/namespaces/default/events",
                        fieldSelector=f"involvedObject.name={name},"
                        f"reason={profilecontroller.UNREACHABLE_REASON}",
                    )["items"]
                )

            (event,) = eventually(warned, "the ColocationProfileWebhookUnreachable Event")
            assert "created without this profile" in event["message"]
        print(f"pod created with the webhook down in {took:.2f} s")
        assert "koordinator.sh/qosClass" not in (pod["metadata"].get("labels") or {})
        assert pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "500m"
        assert took < 15.0  # refused at once, not waited on (busy machines take seconds)
    finally:
        for path in reversed(cleanup):
            with contextlib.suppress(rest.ApiError):
                map_off.delete(path)


def test_webhook_slow_pods_are_created_unmutated_after_the_timeout(
    map_off: rest.Rest, tmp_path: Path
) -> None:
    """The server answers after the API server's 3 s timeout: the pod is created unmutated
    in about 3 s, not refused."""
    cleanup: list[str] = []
    slow = threading.Event()
    release = threading.Event()

    def stall() -> None:
        if slow.is_set():
            release.wait(60)  # bounded: released below once the pod is created

    try:
        _name, pods = install(map_off, cleanup, {"qosClass": "BE", "priorityClassName": ""})
        with served(map_off, "webhook", tmp_path, before_answer=stall):
            in_force(map_off, pods, _pod("probe", {"app": "x"}), "koordinator.sh/qosClass")
            slow.set()
            started = time.monotonic()
            pod = map_off.create(pods, _pod("slow", {"app": "x"}))
            took = time.monotonic() - started
            release.set()
        print(f"pod created with the webhook stalled in {took:.2f} s")
        assert "koordinator.sh/qosClass" not in (pod["metadata"].get("labels") or {})
        # unmutated, so the API server gave up before the stalled answer; in about 3 s
        assert 2.5 <= took < 30.0
    finally:
        release.set()
        for path in reversed(cleanup):
            with contextlib.suppress(rest.ApiError):
                map_off.delete(path)


def test_a_switch_creates_the_new_path_before_deleting_the_old(
    kube: rest.Rest, tmp_path: Path
) -> None:
    """auto: discovery says no (webhook configuration kept), then yes (an upgrade to 1.36):
    the policy and binding are created and the webhook configuration deleted; a pod created
    meanwhile is mutated once whichever applied it (the suffix not appended twice)."""
    cleanup: list[str] = []
    served_now = [False]
    try:
        name, pods = install(
            kube,
            cleanup,
            {
                "qosClass": "BE",
                "priorityClassName": "",
                "labels": {"team": "data"},
                "labelSuffixes": {"team": "-b"},
            },
        )
        with served(kube, "auto", tmp_path, discover=lambda: served_now[0]) as (
            controller,
            _server,
            _outcomes,
        ):
            assert controller.path == "webhook"
            in_force(kube, pods, _pod("probe", {"app": "x"}), "koordinator.sh/qosClass")
            served_now[0] = True
            policy = f"nodeqos-colocation-{name}"
            policy_path = profilecontroller.POLICIES.path(policy)

            def both() -> bool:
                with contextlib.suppress(rest.ApiError):
                    kube.get(policy_path)
                    kube.get(CONFIG)
                    return True
                return False

            mid_switch = []
            if both():
                mid_switch.append(kube.create(pods, _pod("both", {"app": "x"})))

            def switched() -> bool:
                try:
                    kube.get(CONFIG)
                except rest.ApiError as err:
                    assert err.not_found
                    return controller.path == "policy"
                return False

            eventually(switched, "the webhook configuration gone after the switch", timeout=30)
            kube.get(policy_path)  # the policy is there
            kube.get(profilecontroller.BINDINGS.path(policy))
            in_force(kube, pods, _pod("probe2", {"app": "x"}), "koordinator.sh/qosClass")
            after = kube.create(pods, _pod("after", {"app": "x"}))
        for pod in [*mid_switch, after]:
            assert pod["metadata"]["labels"]["team"] == "data-b"
    finally:
        for path in reversed(cleanup):
            with contextlib.suppress(rest.ApiError):
                kube.delete(path)


def test_the_manager_daemon_picks_the_webhook_where_the_policies_are_not_served(
    map_off: rest.Rest,
) -> None:
    """nodeqos-manager with --profile-path auto (the default) and --webhook-addr on the
    MAP-off server: discovery picks the webhook, the daemon's /profiles mutates the pod,
    and its metrics say so."""
    kube = map_off
    suffix = uuid.uuid4().hex[:8]
    namespace = f"ppd-{suffix}"
    kube.create("/api/v1/namespaces", {"metadata": {"name": namespace, "labels": {"pp": suffix}}})
    name = f"ppd-{suffix}"
    port = controlplane.free_port()
    options = daemon.Options(
        config_namespace=namespace,
        lease_namespace=namespace,
        leader_elect=False,
        metrics_addr="127.0.0.1:0",
        node_selector=f"nodeqos-test=none-{suffix}",
        manage_nodemetrics=False,
        webhook_addr=f"127.0.0.1:{port}",
        webhook_url=f"https://127.0.0.1:{port}",
    )
    running = daemon.build(options, CollectorRegistry(), client=kube)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    try:
        kube.create(
            PROFILES,
            {
                "apiVersion": "config.koordinator.sh/v1alpha1",
                "kind": "ClusterColocationProfile",
                "metadata": {"name": name},
                "spec": {
                    "namespaceSelector": {"matchLabels": {"pp": suffix}},
                    "qosClass": "BE",
                    "priorityClassName": "",
                },
            },
        )
        pods = f"/api/v1/namespaces/{namespace}/pods"
        in_force(kube, pods, _pod("probe", {"app": "x"}), "koordinator.sh/qosClass")
        pod = kube.create(pods, _pod("d", {"app": "x"}))
        requests = pod["spec"]["containers"][0]["resources"]["requests"]
        assert _ints(requests) == {
            "kubernetes.io/batch-cpu": 500,
            "kubernetes.io/batch-memory": 1 << 30,
        }
        value = running.registry.get_sample_value
        assert value("nodeqos_manager_profile_path", {"path": "webhook"}) == 1
        assert value("nodeqos_manager_profile_path", {"path": "policy"}) == 0
        assert (value("nodeqos_manager_profile_reviews_total", {"outcome": "mutated"}) or 0) >= 1
    finally:
        running.stop()
        thread.join(30)
        for path in (f"{PROFILES}/{name}", CONFIG, f"/api/v1/namespaces/{namespace}"):
            with contextlib.suppress(rest.ApiError):
                kube.delete(path)


def test_the_webhook_path_draws_the_probability_in_process(
    map_off: rest.Rest, tmp_path: Path
) -> None:
    """50% on the webhook path: the draw (injected, alternating 50 and 51) applies the
    profile when at most 50, with no annotation round trip and no probability webhook."""
    cleanup: list[str] = []
    draws = iter([50, 51] * 50)
    try:
        _name, pods = install(
            map_off, cleanup, {"qosClass": "BE", "priorityClassName": "", "probability": "50%"}
        )
        with served(map_off, "webhook", tmp_path, draw=lambda: next(draws)):
            deadline = time.monotonic() + 60
            while True:  # in force once a pod comes back mutated; realign on a 50 draw next
                probe = map_off.request(
                    "POST", pods, query={"dryRun": "All"}, body=_pod("probe", {"app": "x"})
                )
                if "koordinator.sh/qosClass" in (probe["metadata"].get("labels") or {}):
                    break
                assert time.monotonic() < deadline, "not applied within 60 s"
                time.sleep(0.5)
            created = [map_off.create(pods, _pod(f"p{i}", {"app": "x"})) for i in range(4)]
        applied = ["koordinator.sh/qosClass" in p["metadata"]["labels"] for p in created]
        assert applied == [False, True, False, True]  # draws 51, 50, 51, 50
        assert all(
            not any(
                k.startswith(probability.ANNOTATION_PREFIX)
                for k in p["metadata"].get("annotations") or {}
            )
            for p in created
        )
        assert not any(
            w["metadata"]["name"] == probability.CONFIGURATION
            for w in map_off.get(profilecontroller.WEBHOOKS.path())["items"]
        )
    finally:
        for path in reversed(cleanup):
            with contextlib.suppress(rest.ApiError):
                map_off.delete(path)


def test_a_check_of_the_webhook_that_hangs_costs_a_pass_its_bound_once(map_off: rest.Rest) -> None:
    """The leader's check of its webhook waits `probe_wait` at most, even where the check
    itself never returns (the Service's name lookup has no timeout); while it hangs, later
    passes start no second one and count the webhook down; once it returns, checks resume."""
    release = threading.Event()
    calls: list[str] = []

    def probe(_config: Any, _ca: bytes, path: str) -> str | None:
        calls.append(path)
        if len(calls) == 1:
            release.wait(60)  # bounded: released below
            return "released"
        return None

    registry = CollectorRegistry()
    controller = profilecontroller.ProfileController(
        map_off,
        None,
        webhook=profilecontroller.Webhook({"url": "https://127.0.0.1:9"}, b""),
        profile_path="webhook",
        metrics=telemetry.Metrics(registry),
        probe=probe,
        probe_wait=0.2,
    )

    def up() -> float | None:
        return registry.get_sample_value("nodeqos_manager_profile_webhook_up")

    try:
        controller._check_webhook()  # hangs in its thread: the pass goes on
        assert up() == 0
        controller._check_webhook()
        assert (up(), len(calls)) == (0, 1)  # no second check beside the hung one
        release.set()
        eventually(lambda: controller._probing is not None and not controller._probing.is_alive(),
                   "the hung check to return")  # fmt: skip
        controller._check_webhook()
        assert (up(), len(calls)) == (1, 2)
    finally:
        release.set()
        controller.stop()
