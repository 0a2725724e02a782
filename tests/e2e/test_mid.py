"""The Mid tier on real nodes (issue 39): a Prod Deployment's predicted peak becomes mid-cpu.

deploy/ installed with the colocation overlay of testbed.colocationloop (report every
30 s, update every 30 s), BE suppression off (its cfsQuota policy unsets every
extended-resource pod's quota, Mid's too) and the agents' peak predictor shortened:
a 1 minute cold start, a training every 10 s. An idle Prod Deployment on n1 asks
much more than it uses; once its histograms are out of the cold start its NodeMetric
carries `prodReclaimableMetric` and the manager publishes `kubernetes.io/mid-cpu`.
A ClusterColocationProfile maps the pods labelled ``role=mid`` to the PriorityClass
`koord-mid` (7000, Koordinator's), so the API server rewrites their cpu/memory into
mid-cpu/mid-memory; kube-scheduler places such a pod on n1 and the agent gives its
pod cgroup the shares, quota and memory limit of those resources. Then the Prod pod
starts burning a core (a file the test creates in a hostPath directory): its predicted
peak rises and n1's mid-cpu shrinks.

Two shared cores carry the nodes and whatever else runs: every wait is a condition
with a deadline and the load checks are directions (appears, shrinks).
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import pytest

from kube import quantity, rest
from testbed import colocationloop, localcluster, placementwatch
from tests.e2e.conftest import RealCluster

pytestmark = [pytest.mark.e2e, pytest.mark.controlplane, pytest.mark.slow]

NODE = "n1"
TRAINING_SECONDS = 10
AGENT_ARGS = (
    "--prediction-cold-start-duration=1m",
    f"--prediction-training-interval={TRAINING_SECONDS}s",
    "--prediction-cpu-histogram-decay-halflife=10m",
)
NO_SUPPRESSION = {"clusterStrategy": {"enable": False}}
PROD_NAMESPACE, MID_NAMESPACE = "mid-prod", "mid-pods"
PROFILE = "mid-e2e"
PRIORITY_CLASS, PRIORITY_VALUE = "koord-mid", 7000  # Koordinator's
PRIORITY_CLASSES = colocationloop.PRIORITY_CLASSES
PROD_REQUEST_MILLIS = 800
MID_REQUEST_MILLIS, MID_LIMIT_MILLIS = 200, 500
MID_MEMORY_LIMIT = 64 << 20
# web's requests do not change when it starts burning: only its predicted peak can take
# this much off mid-cpu (a busy thread measures several hundred millicores even here)
SHRINK_MILLIS = 250
CYCLE = colocationloop.REPORT_SECONDS + colocationloop.UPDATE_SECONDS
CGROUP = Path("/sys/fs/cgroup")  # cgroup v1, as testbed.localnodes requires


def _deployment(
    name: str,
    namespace: str,
    command: str,
    resources: dict[str, Any],
    trigger: Path | None = None,
) -> dict[str, Any]:
    """One busybox replica on n1; `trigger`, a host directory, mounted at /trigger."""
    labels = {"app": name, "role": "mid" if namespace == MID_NAMESPACE else "prod"}
    found: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": NODE},
                    "containers": [
                        {
                            "name": "main",
                            "image": colocationloop.BUSYBOX_IMAGE,
                            "imagePullPolicy": "Never",
                            "command": ["sh", "-c", command],
                            "resources": resources,
                        }
                    ],
                    "terminationGracePeriodSeconds": 1,
                    "automountServiceAccountToken": False,
                },
            },
        },
    }
    if trigger is not None:
        spec = found["spec"]["template"]["spec"]
        spec["volumes"] = [
            {"name": "trigger", "hostPath": {"path": str(trigger), "type": "Directory"}}
        ]
        spec["containers"][0]["volumeMounts"] = [{"name": "trigger", "mountPath": "/trigger"}]
    return found


def _profile() -> dict[str, Any]:
    return {
        "apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile",
        "metadata": {"name": PROFILE},
        "spec": {
            "namespaceSelector": {"matchLabels": {"colocation": "mid"}},
            "selector": {"matchLabels": {"role": "mid"}},
            "qosClass": "LS",
            "priorityClassName": PRIORITY_CLASS,
        },
    }


def _mid_cpu(kube: rest.Rest) -> int | None:
    node = kube.get(f"/api/v1/nodes/{NODE}")
    value = node["status"].get("allocatable", {}).get(colocationloop.MID_CPU)
    return None if value is None else quantity.quantity_value(value)


def _reclaimable_millis(kube: rest.Rest) -> int | None:
    metric = colocationloop.nodemetrics(kube).get(NODE) or {}
    found = ((metric.get("status") or {}).get("prodReclaimableMetric") or {}).get("resource")
    cpu = ((found or {}).get("resources") or {}).get("cpu")
    return None if cpu is None else quantity.cpu_millis(cpu)


def _running(kube: rest.Rest, namespace: str) -> list[dict[str, Any]]:
    return [p for p in placementwatch.pods(kube, namespace) if placementwatch.ready(p)]


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _gone(kube: rest.Rest, path: str) -> bool:
    return not localcluster.exists(kube, path)


def _pod_cgroup(controller: str, uid: str) -> Path:
    # no cpu/memory requests left: kubelet sees a BestEffort pod
    return CGROUP / controller / f"nodeqos-{NODE}" / "kubepods" / "besteffort" / f"pod{uid}"


def test_predicted_prod_slack_becomes_mid_capacity_for_mid_pods(
    real_cluster: RealCluster, nodeqos_image: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Prediction in the NodeMetric, mid-cpu on the Node, a Mid pod with Mid cgroups on it,
    and mid-cpu shrinking once the Prod peak rises."""
    kube = real_cluster.kube
    trigger = tmp_path_factory.mktemp("mid-trigger")  # on the host: the nodes are local
    lines: list[str] = []

    def say(text: str) -> None:
        lines.append(text)
        print(text, flush=True)

    def story() -> str:
        return "\n".join(lines)

    wait_for = colocationloop.wait_for
    with colocationloop.installed(
        kube,
        real_cluster.plane,
        nodeqos_image,
        tmp_path_factory.mktemp("mid") / "state",
        say,
        agent_args=AGENT_ARGS,
        thresholds=NO_SUPPRESSION,
    ):
        localcluster.delete_path(kube, f"{PRIORITY_CLASSES}/{PRIORITY_CLASS}")
        kube.create(
            PRIORITY_CLASSES,
            {
                "metadata": {"name": PRIORITY_CLASS},
                "value": PRIORITY_VALUE,
                "preemptionPolicy": "Never",
            },
        )
        kube.create(colocationloop.PROFILES, _profile())
        try:
            for name, labels in ((PROD_NAMESPACE, {}), (MID_NAMESPACE, {"colocation": "mid"})):
                kube.create("/api/v1/namespaces", {"metadata": {"name": name, "labels": labels}})
                localcluster.wait_namespace_ready(kube, name)
            # by MutatingAdmissionPolicy (1.36 on) or the manager's webhook (1.34-1.35)
            wait_for(
                lambda: colocationloop.applied_by(kube, PROFILE), "the Mid profile", timeout=120
            )

            # 1. an idle Prod Deployment: its predicted peak is far below its request
            localcluster.apply(
                kube,
                _deployment(
                    "web",
                    PROD_NAMESPACE,
                    # idle until the test touches the trigger file on the host, then busy
                    "until [ -e /trigger/burn ]; do sleep 1; done; while :; do :; done",
                    {
                        "requests": {"cpu": f"{PROD_REQUEST_MILLIS}m", "memory": "512Mi"},
                        "limits": {"cpu": "2", "memory": "1Gi"},
                    },
                    trigger=trigger,
                ),
            )
            wait_for(
                lambda: _running(kube, PROD_NAMESPACE), "the Prod web pod Running", timeout=120
            )
            started = time.monotonic()
            reclaimable = wait_for(
                lambda: _reclaimable_millis(kube) or None,
                f"prodReclaimableMetric cpu in {NODE}'s NodeMetric",
                timeout=60 + 3 * CYCLE,
            )
            say(
                f"{NODE}: prodReclaimableMetric cpu {reclaimable}m after "
                f"{time.monotonic() - started:.0f}s (web asks {PROD_REQUEST_MILLIS}m, sleeps)"
            )
            mid_before = wait_for(
                lambda: (v := _mid_cpu(kube)) is not None and v >= 2 * MID_REQUEST_MILLIS and v,
                f"{NODE}'s mid-cpu with room for a Mid pod",
                timeout=2 * CYCLE,
            )
            say(f"{NODE}: mid-cpu {mid_before}m")

            # 2. a Mid pod: the profile rewrites it, kube-scheduler places it, the agent sets its cgroups
            localcluster.apply(
                kube,
                _deployment(
                    "mid",
                    MID_NAMESPACE,
                    "sleep 100000",
                    {
                        "requests": {"cpu": f"{MID_REQUEST_MILLIS}m", "memory": "32Mi"},
                        "limits": {"cpu": f"{MID_LIMIT_MILLIS}m", "memory": "64Mi"},
                    },
                ),
            )
            (mid_pod,) = wait_for(
                lambda: _running(kube, MID_NAMESPACE), "the Mid pod Running", timeout=120
            )
            requests = mid_pod["spec"]["containers"][0]["resources"]["requests"]
            uid = mid_pod["metadata"]["uid"]
            expected = (
                MID_LIMIT_MILLIS * 100,  # cfs_quota_us over the 100 ms period
                MID_REQUEST_MILLIS * 1024 // 1000,  # shares
                MID_MEMORY_LIMIT,
            )

            def cgroups() -> tuple[int | None, int | None, int | None]:
                cpu, memory = _pod_cgroup("cpu", uid), _pod_cgroup("memory", uid)
                return (
                    _read_int(cpu / "cpu.cfs_quota_us"),
                    _read_int(cpu / "cpu.shares"),
                    _read_int(memory / "memory.limit_in_bytes"),
                )

            seen: list[tuple[int | None, int | None, int | None]] = []

            def mid_cgroups() -> bool:
                seen.append(cgroups())
                return seen[-1] == expected

            try:
                wait_for(mid_cgroups, "the Mid pod's cgroups from mid-cpu/mid-memory", timeout=90)
            except TimeoutError:
                raise AssertionError(f"{seen[-1:]} != {expected}\n{story()}") from None
            say(
                f"Mid pod on {mid_pod['spec']['nodeName']} asking {requests} (priority "
                f"{mid_pod['spec'].get('priority')}, QoS {mid_pod['status'].get('qosClass')}); "
                f"cgroup quota/shares/memory {cgroups()}"
            )

            # 3. the Prod load's peak rises: the web pod starts burning a core; mid-cpu shrinks
            mid_before = _mid_cpu(kube) or 0
            (trigger / "burn").touch()
            started = time.monotonic()
            shown: list[int | None] = []

            def shrunk() -> tuple[int] | None:
                # a tuple: mid-cpu may well shrink to 0, which wait_for would take for "not yet"
                value = _mid_cpu(kube)
                if not shown or shown[-1] != value:
                    shown.append(value)
                if value is not None and value < mid_before - SHRINK_MILLIS:
                    return (value,)
                return None

            try:
                (mid_after,) = wait_for(
                    shrunk,
                    f"{NODE}'s mid-cpu to shrink below {mid_before - SHRINK_MILLIS}m",
                    timeout=3 * CYCLE,
                )
            except TimeoutError as err:
                try:
                    reclaimable_now: int | str | None = _reclaimable_millis(kube)
                except rest.ApiUnavailable as unavailable:  # a loaded machine's API server
                    reclaimable_now = f"unreadable ({unavailable})"
                raise AssertionError(
                    f"{err}: mid-cpu went {shown}, prodReclaimableMetric cpu {reclaimable_now}m\n"
                    f"{story()}"
                ) from None
            shrink_seconds = time.monotonic() - started
            say(
                f"{NODE}: mid-cpu {mid_before}m -> {mid_after}m {shrink_seconds:.0f}s after web "
                f"started burning (one report + one update: {CYCLE}s; went {shown})"
            )
        finally:
            for namespace in (MID_NAMESPACE, PROD_NAMESPACE):
                localcluster.delete_path(kube, f"/api/v1/namespaces/{namespace}")
            localcluster.delete_path(kube, f"{colocationloop.PROFILES}/{PROFILE}")
            localcluster.delete_path(kube, f"{PRIORITY_CLASSES}/{PRIORITY_CLASS}")
            for kind in ("mutatingadmissionpolicybindings", "mutatingadmissionpolicies"):
                localcluster.delete_path(
                    kube,
                    rest.object_path(
                        "admissionregistration.k8s.io", "v1", kind, f"nodeqos-colocation-{PROFILE}"
                    ),
                )
            for namespace in (MID_NAMESPACE, PROD_NAMESPACE):
                path = f"/api/v1/namespaces/{namespace}"
                wait_for(
                    functools.partial(_gone, kube, path),
                    f"namespace {namespace} to be gone",
                    timeout=120,
                )
    assert reclaimable > 0, story()
    assert colocationloop.MID_CPU in requests and "cpu" not in requests, story()
    assert mid_pod["spec"].get("priority") == PRIORITY_VALUE, story()
    assert mid_pod["spec"]["nodeName"] == NODE
    assert mid_after < mid_before - SHRINK_MILLIS, story()
