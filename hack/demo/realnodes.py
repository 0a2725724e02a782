"""The demo on real nodes: three real kubelets and containerds run the pods.

`probe` decides whether this machine can: root, the node binaries found or
built by hack/node-setup.sh (`testbed.localnodes.NodeBinaries.find`, which also
checks the machine: cgroup v1, containerd, the CNI plugins), and the nodeqos
image found or built by hack/node-image.sh; it returns what the run needs, or
the reason it cannot. `run` then starts the control plane (kube-scheduler and
kube-controller-manager included), the nodes, and the scenario
`testbed.placementloop` shares with the e2e test: nodeqos installed from deploy/
with its overlay, busy Deployments on n1, and the loop watched to its end; then,
in the same cluster, the colocation scenario of `testbed.colocationloop` (Batch
capacity, a batch Job placed on it, online pressure, an agent stopped), which
tests/e2e/test_colocation.py runs too. `--scenario` picks one or both. The demo
plays no part of Kubernetes in this mode.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kube import rest
from testbed import (
    colocationloop,
    components,
    localnodes,
    onlineserver,
    placementloop,
    placementwatch,
)

REPO = Path(__file__).resolve().parents[2]
IMAGE = "nodeqos.local/nodeqos:dev"  # what hack/node-image.sh tags the archive with


@dataclass(frozen=True, slots=True)
class Setup:
    binaries: localnodes.NodeBinaries
    image_archive: Path


def probe() -> Setup | str:
    """What the real-node mode needs on this machine, or why it cannot run here."""
    if os.geteuid() != 0:
        return "real nodes need root (kubelet, containerd, cgroups, network namespaces)"
    try:
        binaries = localnodes.NodeBinaries.find()
    except localnodes.NodeError as err:
        return f"the node setup is unavailable: {err}"
    done = subprocess.run(
        [str(REPO / "hack" / "node-image.sh")], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return f"the nodeqos image cannot be built: {done.stderr.strip()}"
    return Setup(binaries, Path(done.stdout.strip().splitlines()[-1]))


def say(text: str) -> None:
    print(text, flush=True)


SCENARIOS = ("placement", "colocation")


def run(
    setup: Setup, workdir: Path, *, timeout: float, scenarios: tuple[str, ...] = SCENARIOS
) -> dict[str, Any]:
    """The scenarios on three real nodes, one after the other in one cluster; the summary
    (mode, each outcome, `ok`) for --summary-json."""
    summary: dict[str, Any] = {"mode": "real-nodes", "workdir": str(workdir), "ok": True}
    with (
        localnodes.control_plane(
            placementloop.NODES, controllers=(components.JOB_CONTROLLER,)
        ) as plane,
        localnodes.running_nodes(
            plane,
            placementloop.NODES,
            workdir=workdir / "nodes",
            binaries=setup.binaries,
            # the colocation scenario's web server (testbed.onlineserver)
            images=[onlineserver.image_archive(workdir / "online")],
        ) as nodes,
    ):
        say(
            f"control plane up at {plane.url} (etcd, kube-apiserver, kube-controller-manager, "
            f"kube-scheduler); nodes {', '.join(n.name for n in nodes)} Ready: a kubelet and a "
            "containerd each, on this machine's cores"
        )
        for node in nodes:
            node.ctr("images", "import", str(setup.image_archive))
        say(f"imported {IMAGE} (built from the Dockerfile) into every node's containerd")
        kube = rest.Rest(rest.api_client(plane.kubeconfig), qps=0)
        if "placement" in scenarios:
            say("\n══ scenario: placement (testbed.placementloop) " + "═" * 30)
            with placementloop.installed(kube, plane, IMAGE, workdir / "state", say) as extender:
                outcome = placementloop.run(kube, plane, extender, say, timeout=timeout)
            summarize(outcome)
            summary.update(outcome.to_json())
            summary["ok"] = summary["ok"] and outcome.cooled
        if "colocation" in scenarios:
            say("\n══ scenario: colocation (testbed.colocationloop) " + "═" * 28)
            with colocationloop.installed(kube, plane, IMAGE, workdir / "colocation", say):
                colocation = colocationloop.run(kube, say)
            colocationloop.summarize(colocation, say)
            problems = colocation.problems()
            for problem in problems:
                say(f"  ✗ {problem}")
            summary["colocation"] = {**colocation.to_json(), "problems": problems}
            summary["ok"] = summary["ok"] and not problems
    return summary


def summarize(outcome: placementwatch.Outcome) -> None:
    say("\n── summary " + "─" * 66)
    for node in placementloop.NODES:
        before, after = outcome.before.get(node), outcome.after.get(node)
        say(
            f"  {node}: cpu {'-' if before is None else f'{before:5.1f}%'} → "
            f"{'-' if after is None else f'{after:5.1f}%'}"
        )
    evictions = ", ".join(f"{e['pod']} (from {e['from']})" for e in outcome.evictions)
    placements = ", ".join(f"{p['pod']} → {p['node']}" for p in outcome.placements)
    say(f"  evictions: {evictions or 'none'}")
    say(f"  placements by kube-scheduler (nodeqos extender): {placements or 'none'}")
    say(
        f"  refused (PDB and others): {', '.join(sorted({r['pod'] for r in outcome.refusals})) or 'none'}"
    )
    say(f"  stayed on {placementloop.HOT} under its PDB: {', '.join(outcome.kept) or 'none'}")
    say(
        f"  {placementloop.HOT} "
        + ("cooled below the high mark" if outcome.cooled else "did NOT cool within the time limit")
        + f" — {outcome.seconds:.0f}s, on real nodes"
    )
