"""The scheduling framework's cost: the extender before and after it, side by side (issue #29).

Used by `bench.extender`. The pre-framework extender is the `extender` and `kube`
packages of commit PRE_FRAMEWORK, exported from this checkout's git history into
the cache (`pre_framework_tree`); without the history (a source tarball, a
shallow clone) the comparison is skipped with the reason.

- `server_cpu`: the extender's own CPU per pod (filter then prioritize on the
  server's routes, no HTTP, thread CPU time, every pod its own estimate so no
  answer is cached). Both trees are loaded in one process (`bench._extcpu`)
  and every pod goes to one, then the other, the order alternating: a burst of
  someone else's work on a shared machine hurts both alike. Three such
  processes (rounds); the ratio compares the medians of the rounds' medians.
- `pythonpath`: the PYTHONPATH that runs a tree's `nodeqos-scheduler-extender`
  (`python -m extender.cli`), for the throughput arms.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import lownodeload

REPO = Path(__file__).resolve().parent.parent
PRE_FRAMEWORK = "6b202d9a66ab16ec47f55a34401cca811ec68af4"  # the last extender before #29
CACHE = Path(os.environ.get("NODEQOS_CACHE") or Path.home() / ".cache" / "nodeqos")
PACKAGES = ("extender", "kube")  # all the pre-framework extender imports of ours
TARGET_RATIO = 1.05  # the framework's server CPU per pod over the pre-framework extender's


class Unavailable(RuntimeError):
    """The pre-framework tree cannot be made here; the message says why."""


def pre_framework_tree() -> Path:
    """`extender/` and `kube/` at PRE_FRAMEWORK, exported once into the cache.

    An export (`git archive`), not a `git worktree add`: nothing is registered in
    the repository, so a deleted cache leaves no stale worktree behind.
    """
    tree = CACHE / f"prefw-{PRE_FRAMEWORK[:12]}"
    if (tree / ".complete").exists():
        return tree
    try:
        subprocess.run(
            ["git", "-C", str(REPO), "cat-file", "-e", f"{PRE_FRAMEWORK}^{{commit}}"],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError) as err:
        raise Unavailable(
            f"commit {PRE_FRAMEWORK[:7]} is not in this checkout's git history ({err});"
            " a full clone (git fetch --unshallow) has it"
        ) from None
    tree.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", PRE_FRAMEWORK, *PACKAGES],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    (tree / ".complete").write_text(PRE_FRAMEWORK + "\n")
    return tree


def pythonpath(tree: Path | None) -> str:
    """PYTHONPATH for a process running `tree`'s extender (None: this checkout's)."""
    return str(REPO) if tree is None else f"{tree}{os.pathsep}{REPO}"


def bodies(names: list[str], count: int) -> list[bytes]:
    """`count` ExtenderArgs bodies naming `names`, each pod with an estimate of its own
    (a CPU request of 100m + i), so no answer comes from the per-estimate cache."""
    found = []
    for i in range(count):
        pod = lownodeload.pod_dict(f"incoming-{i}", "bench", "", 10**7 + i, 0)
        pod["spec"].pop("nodeName", None)
        pod["metadata"]["uid"] = f"incoming-{i}"
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{100 + i}m"
        found.append(json.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}).encode())
    return found


def write_case(path: Path, nodes: int, pods: int, warm_up: int) -> None:
    """The synthetic cluster and `warm_up + pods` request bodies naming every node."""
    names = [f"node-{i:05d}" for i in range(nodes)]
    case = {
        "objects": list(lownodeload.cluster_objects(nodes, updated=datetime.now(UTC))),
        "bodies": [body.decode() for body in bodies(names, pods + warm_up)],
        "warm_up": warm_up,
        "first": names[0],
    }
    path.write_text(json.dumps(case))


def run_pair(case: Path, pre: Path, profile: Path | None = None) -> dict[str, list[float]]:
    """Per-pod thread CPU seconds of the pre-framework tree and this one, pod by pod
    in one process of their own (`bench._extcpu`)."""
    argv = [sys.executable, "-m", "bench._extcpu", str(case), str(pre), str(REPO)]
    if profile is not None:
        argv += ["--profile", str(profile)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # cwd: `python -m` puts the working directory first on sys.path
    done = subprocess.run(
        argv, env=env, cwd=case.parent, check=True, capture_output=True, text=True
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for tree, ran in zip((pre, REPO), result["trees"], strict=True):
        expected = tree / "extender" / "__init__.py"
        if Path(ran).resolve() != expected.resolve():
            raise RuntimeError(f"the arm ran {ran}, not {expected}")
    pre_timings, post_timings = result["timings"]
    return {"pre": pre_timings, "framework": post_timings}


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def server_cpu(
    pre: Path, nodes: int, *, pods: int = 200, warm_up: int = 10, rounds: int = 3
) -> dict[str, Any]:
    """Pre-framework against framework server CPU per pod: `rounds` processes, each
    sending `pods` pods to both trees in turn."""
    medians: dict[str, list[float]] = {"pre": [], "framework": []}
    paired: list[float] = []
    loads_seen = []
    with tempfile.TemporaryDirectory() as tmp:
        case = Path(tmp) / "case.json"
        write_case(case, nodes, pods, warm_up)
        for _ in range(rounds):
            loads_seen.append(os.getloadavg()[0])
            timings = run_pair(case, pre)
            for label, values in timings.items():
                medians[label].append(_ms(statistics.median(values)))
            paired.extend(
                post / before
                for before, post in zip(timings["pre"], timings["framework"], strict=True)
            )
            print(
                f"  {nodes} nodes: pre-framework median {medians['pre'][-1]} ms,"
                f" framework {medians['framework'][-1]} ms",
                flush=True,
            )
            loads_seen.append(os.getloadavg()[0])
    pre_median = statistics.median(medians["pre"])
    post_median = statistics.median(medians["framework"])
    ratio = round(post_median / pre_median, 3)
    return {
        "nodes": nodes,
        "names_per_call": nodes,
        "pods_per_round": pods,
        "rounds": rounds,
        "pre_medians_ms": medians["pre"],
        "framework_medians_ms": medians["framework"],
        "pre_median_ms": pre_median,
        "framework_median_ms": post_median,
        "ratio": ratio,
        # the same pod's framework time over its pre-framework time, median over every pod
        "paired_ratio_median": round(statistics.median(paired), 3),
        "target_ratio": TARGET_RATIO,
        "met": ratio <= TARGET_RATIO,
        "load_average_1m": [round(min(loads_seen), 1), round(max(loads_seen), 1)],
    }
