"""The example plugin packages work as a user would run them: `pip install` them, use the stock commands.

A fresh virtual environment gets nodeqos and the examples (`examples/nodepressure`,
a descheduler plugin; `examples/beshares`, a QoS plugin; `examples/bememguard`, a
scheduler plugin) installed with
`pip install --no-deps -e`, exactly what a user's image does, so the plugins are
found only through the entry points their pyproject.toml declares. The
dependencies (kubernetes, click, ...) come from the development environment
through a `.pth` line, so nothing is downloaded. The environment is cached
under $NODEQOS_CACHE (default ~/.cache/nodeqos) keyed by the
pyproject.toml files and this checkout's path; the installs are editable, so
code changes need no rebuild.

Every run drops PYTHONPATH: the console scripts must find nodeqos and the
plugins through the installed metadata alone. Each test also runs the same
command without the plugin installed and sees it refused, so a pass cannot
come from anywhere but the installed package.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from cgroups import CgroupVersion, Driver, QoSLevel
from extender import local
from kube import cache, rest
from testbed import controlplane, localcluster
from tests.builders import make_nodemetric_dict
from tests.cgroupfs_builder import (
    fake_container,
    fake_pod,
    write_meminfo,
    write_pod_tree,
    write_proc_stat,
)
from tests.waiting import eventually

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
NODEPRESSURE = EXAMPLES / "nodepressure"
BESHARES = EXAMPLES / "beshares"
BEMEMGUARD = EXAMPLES / "bememguard"
LABEL = "nodeqos-example"
# No dependency resolution (they are all present) and no isolated build (no download).
PIP_INSTALL = ("-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation")


def _cache_root() -> Path:
    base = os.environ.get("NODEQOS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "nodeqos"
    )
    return Path(base) / "example-venvs"


def _key() -> str:
    digest = hashlib.sha256()
    for part in (
        ROOT / "pyproject.toml",
        NODEPRESSURE / "pyproject.toml",
        BESHARES / "pyproject.toml",
        BEMEMGUARD / "pyproject.toml",
    ):
        digest.update(part.read_bytes())
    digest.update(f"{ROOT}\0{sys.version}\0{sysconfig.get_paths()['purelib']}".encode())
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _build(venv: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        env=user_env(),
    ).stdout.strip()
    # The dependencies (and pip, setuptools) of the development environment,
    # after the new environment's own site-packages: every site directory this
    # process has, since the checkout's own venv reaches the shared
    # dependencies' venv through a .pth file of its own (hack/with-env.sh),
    # and a directory a .pth file names is not searched for further .pth files.
    site_dirs = [path for path in sys.path if path.endswith("site-packages")]
    (Path(purelib) / "_nodeqos_dependencies.pth").write_text("\n".join(site_dirs) + "\n")
    for project in (ROOT, NODEPRESSURE, BESHARES, BEMEMGUARD):
        subprocess.run(
            [python, *PIP_INSTALL, "-e", str(project)],
            check=True,
            env=user_env(),
        )


@pytest.fixture(scope="session")
def venv() -> Path:
    """A virtual environment with nodeqos and the examples installed (built once, cached)."""
    target = _cache_root() / _key()
    stamp = target / ".complete"
    if not stamp.exists():
        with _locked(_cache_root() / ".lock"):
            if not stamp.exists():
                shutil.rmtree(target, ignore_errors=True)
                _build(target)
                stamp.touch()
    return target


def user_env(**extra: str) -> dict[str, str]:
    """The environment without this checkout on PYTHONPATH (the installed metadata decides)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, **extra}


def run(argv: list[str | Path], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, env=user_env()
    )


def run_without_plugins(module: str, argv: list[str | Path]) -> subprocess.CompletedProcess[str]:
    """The same command from the development environment, where no example is installed."""
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=120,
        env=user_env(PYTHONPATH=str(ROOT)),
    )


@pytest.mark.parametrize("example", [NODEPRESSURE, BESHARES, BEMEMGUARD], ids=lambda p: p.name)
def test_the_examples_own_tests_pass_once_installed(venv: Path, example: Path) -> None:
    """Each example's tests (which need its entry point installed) pass in the fresh environment."""
    done = subprocess.run(
        [venv / "bin" / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=example,
        capture_output=True,
        text=True,
        timeout=300,
        env=user_env(),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert " passed" in done.stdout and "skipped" not in done.stdout


def test_simulate_shows_the_installed_plugins_evictions(venv: Path) -> None:
    """`nodeqos-descheduler simulate -o json` over the example snapshot: NodePressure's two evictions."""
    args = [
        *("--config", NODEPRESSURE / "descheduler.yaml", "simulate"),
        *("--snapshot", NODEPRESSURE / "tests" / "snapshot.yaml"),
        *("--now", "2024-05-01T12:00:00Z", "--output", "json"),
    ]
    done = run([venv / "bin" / "nodeqos-descheduler", *args])
    assert done.returncode == 0, done.stderr
    evictions = json.loads(done.stdout)["evictions"]
    assert [(e["pod"], e["node"], e["plugin"]) for e in evictions] == [
        ("default/be-lowprio", "n1", "NodePressure"),
        ("default/be-young", "n1", "NodePressure"),
    ]
    refused = run_without_plugins("descheduler.cli", args)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert 'entry point "NodePressure" in group "nodeqos.descheduler.plugins"' in refused.stderr


@pytest.fixture
def admin(cluster: controlplane.ControlPlane) -> Iterator[tuple[rest.Rest, str]]:
    """An admin client and a fresh namespace; the test's nodes carry LABEL=<namespace>."""
    kube = rest.Rest.from_kubeconfig(cluster.kubeconfig, qps=0)
    namespace = f"ex-{uuid.uuid4().hex[:8]}"
    kube.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
    try:
        yield kube, namespace
    finally:
        for node in kube.get("/api/v1/nodes", labelSelector=f"{LABEL}={namespace}")["items"]:
            kube.delete(f"/api/v1/nodes/{node['metadata']['name']}")
        kube.delete(f"/api/v1/namespaces/{namespace}")


def replica_set(name: str, node: str, qos: str, replicas: int, **resources: Any) -> dict[str, Any]:
    labels = {"app": name, "koordinator.sh/qosClass": qos}
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    if resources:
        container["resources"] = {"requests": resources}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"nodeName": node, "containers": [container]},
            },
        },
    }


@pytest.mark.controlplane
def test_descheduler_evicts_through_the_api_with_the_installed_plugin(
    venv: Path, cluster: controlplane.ControlPlane, admin: tuple[rest.Rest, str], tmp_path: Path
) -> None:
    """`nodeqos-descheduler --once` with NodePressure: one BE pod of the pressured node is evicted."""
    kube, namespace = admin
    hot, calm = f"{namespace}-hot", f"{namespace}-calm"
    for node in (hot, calm):
        localcluster.register_node(kube, node, labels={LABEL: namespace})
    now = localcluster.now_rfc3339()
    pressure = {"lastHeartbeatTime": now, "lastTransitionTime": now}
    kube.patch(
        f"/api/v1/nodes/{hot}/status",
        {
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "KubeletReady", **pressure},
                    {"type": "MemoryPressure", "status": "True", "reason": "Test", **pressure},
                ]
            }
        },
    )
    pods = f"/api/v1/namespaces/{namespace}/pods"
    rs = f"/apis/apps/v1/namespaces/{namespace}/replicasets"
    kube.create(rs, replica_set("batch", hot, "BE", 2))
    kube.create(rs, replica_set("web", hot, "LS", 1, cpu="500m", memory="128Mi"))
    created = eventually(
        lambda: (items := kube.get(pods)["items"]) and len(items) == 3 and items,
        "the ReplicaSet controller's three pods",
        timeout=30,
    )
    for pod in created:
        localcluster.mark_running(kube, pod)
    config = {
        **yaml.safe_load((NODEPRESSURE / "descheduler.yaml").read_text()),
        "nodeSelector": f"{LABEL}={namespace}",
    }
    config["profiles"][0]["pluginConfig"][0]["args"]["maxPodsPerNode"] = 1
    path = tmp_path / "descheduler.yaml"
    path.write_text(yaml.safe_dump(config))
    argv: list[str | Path] = ["--config", path, "--kubeconfig", cluster.kubeconfig, "--once"]

    refused = run_without_plugins("descheduler.cli", argv)
    assert refused.returncode == 2, refused.stdout + refused.stderr

    done = run([venv / "bin" / "nodeqos-descheduler", *argv])
    assert done.returncode == 0, done.stdout + done.stderr
    evicted = [line for line in done.stdout.splitlines() if line.startswith("evicted ")]
    assert len(evicted) == 1, done.stdout
    assert f"from node {hot} (NodePressure, profile pressure)" in evicted[0]
    name = evicted[0].split()[1].split("/")[1]
    assert name.startswith("batch-")
    terminating = {
        p["metadata"]["name"]
        for p in kube.get(pods)["items"]
        if p["metadata"].get("deletionTimestamp")
    }
    assert terminating == {name}


@pytest.mark.controlplane
def test_agent_writes_the_be_knob_with_the_installed_plugin(
    venv: Path, cluster: controlplane.ControlPlane, admin: tuple[rest.Rest, str], tmp_path: Path
) -> None:
    """`nodeqos-agent --qos-extension-plugins=BECPUShares=true`: the BE pod's cpu.weight becomes 1."""
    kube, namespace = admin
    node = f"{namespace}-agent"
    localcluster.register_node(kube, node, labels={LABEL: namespace})
    tree = write_pod_tree(tmp_path / "cgroup", CgroupVersion.V2, Driver.SYSTEMD)
    dirs = {}
    for name, qos in (("batch", "BE"), ("web", "LS")):
        body = {
            "metadata": {"name": name, "labels": {"koordinator.sh/qosClass": qos}},
            "spec": {
                "nodeName": node,
                "containers": [
                    {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                ],
            },
        }
        pod = localcluster.mark_running(
            kube, kube.create(f"/api/v1/namespaces/{namespace}/pods", body)
        )
        ids = [s["containerID"].split("://", 1)[1] for s in pod["status"]["containerStatuses"]]
        fake = fake_pod(
            pod["metadata"]["uid"],
            qos=QoSLevel.BURSTABLE,
            containers=[fake_container(cid) for cid in ids],
        )
        tree.add_pod(fake)
        dirs[name] = tree.root / tree.pod_dir(fake)
    proc = tmp_path / "proc"
    write_proc_stat(proc, user=1000, system=500, idle=9000)
    write_meminfo(proc, total_kb=16 << 20, available_kb=12 << 20)
    argv: list[str | Path] = [
        *("--node-name", node, "--kubeconfig", cluster.kubeconfig),
        *("--cgroup-root", tree.root, "--proc-root", proc),
        *("--metric-cache-path", tmp_path / "cache.db", "--metrics-addr", ""),
        *("--run-for", "5s", "--qos-extension-plugins", "BECPUShares=true"),
        *("--be-cpu-shares-interval-seconds", "0.2"),
    ]
    assert (dirs["batch"] / "cpu.weight").read_text() == "39\n"  # kubelet's, for 1 CPU

    refused = run_without_plugins("agent", argv)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "No such option '--be-cpu-shares-interval-seconds'" in refused.stderr

    done = run([venv / "bin" / "nodeqos-agent", *argv])
    assert done.returncode == 0, done.stdout + done.stderr
    assert (dirs["batch"] / "cpu.weight").read_text().strip() == "1"
    assert (dirs["web"] / "cpu.weight").read_text() == "39\n"


def _nodemetric(kube: rest.Rest, name: str, cpu: str, memory: str) -> None:
    """A fresh NodeMetric for `name`, as the agent would write it."""
    metric = make_nodemetric_dict(
        name,
        node_cpu=cpu,
        node_memory=memory,
        update_time=datetime.now(UTC).replace(microsecond=0),
    )
    created = kube.create(cache.NODEMETRICS.path(), {**metric, "status": {}})
    created["status"] = metric["status"]
    kube.replace(cache.NODEMETRICS.path(name) + "/status", created)


@pytest.mark.controlplane
def test_the_real_scheduler_places_pods_by_the_installed_scheduler_plugin(
    venv: Path, cluster: controlplane.ControlPlane, admin: tuple[rest.Rest, str], tmp_path: Path
) -> None:
    """`nodeqos-scheduler-extender` with BEMemoryGuard behind kube-scheduler: LoadAwareScheduling
    prefers the memory-hot node (lowest CPU), the LS pod lands there, the BE pod does not."""
    kube, namespace = admin
    hot, calm = f"{namespace}-memhot", f"{namespace}-calm"
    # hot: cpu 5%, memory 84% (LoadAware: 54 of 100, 5 of 10); calm: cpu 60%, memory 69% (35, 4)
    for node, cpu, memory in ((hot, "400m", "27Gi"), (calm, "4800m", "22Gi")):
        localcluster.register_node(kube, node, cpu="8", memory="32Gi", labels={LABEL: namespace})
        _nodemetric(kube, node, cpu, memory)
    argv: list[str | Path] = ["--config", BEMEMGUARD / "profile.yaml", "--validate"]
    refused = run_without_plugins("extender.cli", argv)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert 'entry-point group "nodeqos.scheduler.plugins"' in refused.stderr

    port = controlplane.free_port()
    with (tmp_path / "extender.log").open("wb") as log:
        extender = subprocess.Popen(
            [
                venv / "bin" / "nodeqos-scheduler-extender",
                *("--config", BEMEMGUARD / "profile.yaml"),
                *("--kubeconfig", cluster.kubeconfig),
                *("--bind-address", f"127.0.0.1:{port}"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=user_env(),
        )
        try:
            local.wait_ready(port)
            cluster.start_scheduler(
                local.point_scheduler(
                    ROOT / "deploy" / "kube-scheduler" / "second-scheduler.yaml", port
                )
            )
            pods = f"/api/v1/namespaces/{namespace}/pods"
            for name, qos in (("web", "LS"), ("batch", "BE")):
                kube.create(
                    pods,
                    {
                        "metadata": {"name": name, "labels": {"koordinator.sh/qosClass": qos}},
                        "spec": {
                            "schedulerName": "nodeqos-load-aware",
                            "nodeSelector": {LABEL: namespace},
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                                }
                            ],
                        },
                    },
                )
                placed = eventually(
                    lambda name=name: kube.get(f"{pods}/{name}")["spec"].get("nodeName"),
                    f"pod {name} bound",
                    timeout=60,
                )
                assert placed == (hot if qos == "LS" else calm), (name, placed)
        finally:
            extender.terminate()
            extender.wait(15)
            cluster.start_scheduler(None)
            for node in (hot, calm):
                with contextlib.suppress(rest.ApiError):
                    kube.delete(cache.NODEMETRICS.path(node))
    assert "BEMemoryGuard" in (tmp_path / "extender.log").read_text()


def test_docs_walk_through_quotes_the_example() -> None:
    """Every line of the code the docs' descheduler walk-through shows is in examples/nodepressure."""
    page = (ROOT / "docs" / "plugins.md").read_text()
    section = page.split("## A descheduler plugin", 1)[1].split("## A QoS plugin", 1)[0]
    blocks = re.findall(r"```(?:python|toml)\n(.*?)```", section, re.DOTALL)
    assert len(blocks) == 3
    source = "\n".join(
        path.read_text() for path in NODEPRESSURE.rglob("*") if path.suffix in (".py", ".toml")
    )
    missing = [
        line for block in blocks for line in block.splitlines() if line.strip() not in source
    ]
    assert missing == []
