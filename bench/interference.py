"""Online tail latency while batch work fills the node: nodeqos's colocation promise, measured.

Run with `python -m bench interference [--rounds N] [--seconds S] [--warmup S]
[--rate R]` as root on a machine prepared for real nodes (hack/node-setup.sh,
hack/host-setup.sh bench for nginx); writes interference.json and
interference.png (see bench/__init__.py). Issue #34.

One real node (kubelet + containerd, `testbed.localnodes`) beside the local
control plane with kube-scheduler. Its pods are confined to CPU 1 (the cpuset
of its cgroup root); this process pins itself to CPU 0 first, so everything it
starts (control plane, containerd, kubelet, vegeta) stays there, and the
kubelet's static CPU manager reserves that CPU for the system strictly
(`reservedSystemCPUs: "0"`, option `strict-cpu-reservation`), so every
container's cpuset is CPU 1 (the none policy would write both CPUs into
kubepods, which its parent's cpuset refuses).

- Online: Debian's nginx serving a 615-byte page from a locally built image
  (`testbed.ociimage.nginx_image`), an LS Burstable pod, driven by vegeta
  (open loop) at one constant rate for the whole run: `--rate`, or calibrated
  at the start so that nginx alone uses about 27 % of the node's CPU.
- Batch: two busy pods (`while :; do :; done`) placed by kube-scheduler: with
  nodeqos, asking cpu in a namespace a ClusterColocationProfile selects, so the
  API server makes them BE asking batch-cpu; without it, no requests at all
  (BestEffort, kubelet's cpu.shares 2).
- Node CPU: the node's cgroup root's cpuacct.usage over the measured seconds, as
  a share of its one CPU; the online pod's, the BE QoS cgroup's and nodeqos's
  own pods' the same way.

Arms, all in one run, each round in the base order (1, 2, 3, 5, 4) rotated by
the round's number so that nodeqos is installed once a round: (1) online alone;
(2) + batch, kubelet defaults, nodeqos not installed; (3) + nodeqos colocation
as shipped (Batch resources, BatchResource cgroups, BE suppression by cfsQuota);
(4) arm 3 with the agent's `BE_CPU_IDLE_GATES` (cpu.idle on BE pods; left out
when this checkout's agent has no such gate); (5) arm 3 with BE suppression by
cpuset. Each arm: batch pods Running, `--warmup` seconds, then `--seconds` of
load measured. The goal (issue #34): in the best nodeqos arm node CPU >= 60 %
with p99 <= 1.10x and p99.9 <= 1.25x arm 1's, and p99 better than arm 2's by
more than the rounds' spread. Exit 1 when it is missed or a part fails to start.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import signal
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bench
from bench import _interference_arms as arms
from bench import _interference_cluster as onenode
from bench import _interference_nodeqos as qos
from bench import _interference_results as results
from bench import results_dir, write_results
from kube import rest
from testbed import localnodes, onlineserver
from testbed import vegeta as _vegeta

RUN_BY_DEFAULT = False  # real nodes, ~20 minutes: `python -m bench interference`
REPO = Path(__file__).resolve().parent.parent
NODE_IMAGE_SCRIPT = REPO / "hack" / "node-image.sh"
NODEQOS_IMAGE = "nodeqos.local/nodeqos:dev"
DOCS_PLOT = REPO / "docs" / "img" / "interference.png"


def build_nodeqos_image() -> Path:
    done = subprocess.run([str(NODE_IMAGE_SCRIPT)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip() or f"{NODE_IMAGE_SCRIPT} failed")
    return Path(done.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def real_cluster(workdir: Path, images: list[Path]) -> Iterator[arms.Cluster]:
    with (
        localnodes.control_plane((onenode.NODE,)) as plane,
        localnodes.running_nodes(
            plane,
            (onenode.NODE,),
            workdir=workdir / "nodes",
            images=images,
            kubelet_extra=onenode.KUBELET_CPU_MANAGER,
            cpu=onenode.NODE_ROOT_CPU,
        ),
    ):
        kube = rest.Rest(rest.api_client(plane.kubeconfig), qps=0)
        try:
            yield arms.Cluster(kube, plane, workdir)
        finally:
            with contextlib.suppress(Exception):
                onenode.delete_namespaces(
                    kube,
                    (onenode.BATCH_NAMESPACE, onenode.PLAIN_NAMESPACE, onenode.ONLINE_NAMESPACE),
                )


@dataclass(frozen=True, slots=True)
class Parts:
    """How the bench starts each part; a test injects one that fails."""

    nginx_image: Callable[[Path], Path] = field(default=lambda d: onlineserver.image_archive(d))
    nodeqos_image: Callable[[], Path] = field(default=lambda: build_nodeqos_image())
    generator: Callable[[], Path] = field(default=lambda: _vegeta.find())
    cluster: Callable[[Path, list[Path]], contextlib.AbstractContextManager[arms.Cluster]] = field(
        default=lambda w, i: real_cluster(w, i)
    )
    server: Callable[[arms.Cluster], tuple[str, str]] = field(
        default=lambda c: onenode.start_server(c.kube)
    )


def run(options: arms.Options, say: arms.Say, parts: Parts | None = None) -> dict[str, Any]:
    parts = parts or Parts()
    chosen = arms.ARMS if qos.gate_available() else tuple(a for a in arms.ARMS if a.number != 4)
    skipped = (
        []
        if len(chosen) == len(arms.ARMS)
        else [{"arm": 4, "why": f"this checkout's agent has no {qos.BE_CPU_IDLE_GATE} gate"}]
    )
    load_before = os.getloadavg()
    with (
        onenode.on_host_cpus(),
        tempfile.TemporaryDirectory(prefix="nodeqos-interference-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        workdir = Path(tmp)
        vegeta = arms.start("generator", parts.generator)
        nginx = arms.start("nginx image", lambda: parts.nginx_image(workdir / "images"))
        image_archive = arms.start("nodeqos image", parts.nodeqos_image)
        c = arms.start(
            "node", lambda: stack.enter_context(parts.cluster(workdir, [nginx, image_archive]))
        )
        url, online_uid = arms.start("server", lambda: parts.server(c))
        say(f"online server nginx at {url} (pod uid {online_uid})")
        arms.start("server", lambda: urllib.request.urlopen(url, timeout=5).read())
        calibration = (
            arms.calibrate(vegeta, url, online_uid, workdir / "vegeta", say)
            if options.rate is None
            else {"rate": options.rate}
        )
        rate = int(calibration["rate"])
        rig = arms.Rig(c, NODEQOS_IMAGE, say)
        stack.callback(rig.close)
        onenode.namespace(c.kube, onenode.BATCH_NAMESPACE, {"colocation": "on"})
        onenode.namespace(c.kube, onenode.PLAIN_NAMESPACE, {})
        records = []
        for number in range(options.rounds):
            order = arms.round_order(chosen, number)
            say(
                f"round {number + 1}/{options.rounds}: arms {', '.join(str(a.number) for a in order)}"
            )
            for arm in order:
                record = arms.measure(rig, arm, vegeta, url, online_uid, rate, options, number)
                records.append(record)
                say(
                    f"  arm {arm.number} {arm.name}: node CPU {record['node_cpu_percent']}%, "
                    f"p50 {record['p50_ms']} ms, p99 {record['p99_ms']} ms, "
                    f"p99.9 {record['p999_ms']} ms, errors {record['errors']}"
                )
    summary = results.summarize(records)
    return {
        "rounds": options.rounds,
        "round_seconds": options.seconds,
        "warmup_seconds": options.warmup,
        "rate": rate,
        "calibration": calibration,
        "kernel": platform.release(),
        "nproc": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "isolation": (
            f"node {onenode.NODE}'s pods on CPU {onenode.NODE_CPUS} (cpuset of its cgroup root "
            f"/nodeqos-{onenode.NODE}); the bench, vegeta, control plane, kubelet and containerd "
            f"on CPU {','.join(map(str, sorted(onenode.HOST_CPUS)))} (sched_setaffinity); "
            "kubelet static CPU manager, reservedSystemCPUs 0 with strict-cpu-reservation "
            "(containers' cpuset 1); nodeqos's agent and manager are pods on the node"
        ),
        "threshold_percent": onenode.THRESHOLD_PERCENT,
        "arms": [
            {
                "number": a.number,
                "name": a.name,
                "policy": a.policy if a.nodeqos else None,
                "agent_feature_gates": a.gates if a.nodeqos else None,
            }
            for a in chosen
        ],
        "skipped_arms": skipped,
        "records": records,
        "summary": {str(k): v for k, v in summary.items()},
        "goal": results.goal(summary),
        "table": results.table(summary),
    }


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench interference", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every arm (default 3)")
    parser.add_argument("--seconds", type=float, default=25.0, help="measured load per arm (25)")
    parser.add_argument("--warmup", type=float, default=10.0, help="settling before (10)")
    parser.add_argument("--rate", type=int, default=None, help="requests/s (default: calibrated)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.seconds <= 0 or args.warmup < 0 or (args.rate or 1) < 1:
        parser.error("--rounds, --seconds and --rate must be > 0, --warmup >= 0")
    return args


def say(text: str) -> None:
    print(text, flush=True)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None, parts: Parts | None = None) -> int:
    args = parse(list(argv) if argv is not None else [])
    options = arms.Options(args.rounds, args.seconds, args.warmup, args.rate)
    # SIGTERM (timeout(1), a CI runner) unwinds like Ctrl-C: the node, its pods and
    # cgroups, and the control plane are stopped on the way out, never left behind.
    previous = signal.signal(signal.SIGTERM, _interrupted)
    try:
        result = run(options, say, parts)
    except onenode.StartFailure as err:
        print(f"interference: {err}", file=sys.stderr, flush=True)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
    path = write_results("interference", result)
    png = results.plot(result["records"], rate=result["rate"])
    (results_dir() / "interference.png").write_bytes(png)
    if results_dir() == bench.RESULTS_DIR:  # published: the docs show this run's plot
        DOCS_PLOT.parent.mkdir(exist_ok=True)
        DOCS_PLOT.write_bytes(png)
    print(result["table"], flush=True)
    print(f"goal: {result['goal']}", flush=True)
    print(f"wrote {path}", flush=True)
    return 0 if result["goal"]["met"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
