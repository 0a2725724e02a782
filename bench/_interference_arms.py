"""The arms of `python -m bench interference`: what each one runs, and one round of it.

`Rig` keeps the node's nodeqos state across arms (installed or not, its BE
suppression policy, the agent's feature gates) and changes only what the next
arm needs; `measure` runs one arm once: batch pods (if the arm has them)
Running, the warm-up, then vegeta's constant-rate load with the node's cgroup
counters read around it. `calibrate` picks the one rate of the run.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import _interference_cluster as onenode
from bench import _interference_nodeqos as qos
from kube import rest
from testbed import vegeta as _vegeta

TARGET_ONLINE_PERCENT = 27.5  # of the node's CPU, nginx alone
PROBE_RATE = 1000
PROBE_SECONDS = 6.0
Say = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Arm:
    number: int
    name: str
    batch: bool
    nodeqos: bool
    policy: str = qos.CFS_QUOTA
    gates: str = ""


ARMS = (
    Arm(1, "online alone", batch=False, nodeqos=False),
    Arm(2, "kubelet defaults", batch=True, nodeqos=False),
    Arm(3, "nodeqos cfsQuota", batch=True, nodeqos=True),
    Arm(5, "nodeqos cpuset", batch=True, nodeqos=True, policy=qos.CPUSET),
    Arm(4, "nodeqos + cpu.idle", batch=True, nodeqos=True, gates=qos.BE_CPU_IDLE_GATES),
)


def round_order(arms: tuple[Arm, ...], index: int) -> list[Arm]:
    """The arms of round `index`: the base order rotated by `index`."""
    shift = index % len(arms)
    return [*arms[shift:], *arms[:shift]]


@dataclass(frozen=True, slots=True)
class Options:
    rounds: int = 3
    seconds: float = 25.0
    warmup: float = 10.0
    rate: int | None = None


@dataclass(frozen=True, slots=True)
class Cluster:
    kube: rest.Rest
    plane: Any  # controlplane.ControlPlane (anything with install_crds in tests)
    workdir: Path


def start(part: str, step: Callable[[], Any]) -> Any:
    """Run one start step; any failure becomes a StartFailure naming `part`."""
    try:
        return step()
    except onenode.StartFailure:
        raise
    except Exception as err:
        raise onenode.StartFailure(part, f"{type(err).__name__}: {err}") from err


def calibrate(vegeta: Path, url: str, online_uid: str, workdir: Path, say: Say) -> dict[str, Any]:
    """The rate at which nginx alone uses TARGET_ONLINE_PERCENT of the node's CPU."""
    start("generator", lambda: _vegeta.attack(vegeta, url, rate=200, seconds=2, workdir=workdir))
    marks = [onenode.counters(online_uid, [])]
    report = start(
        "generator",
        lambda: _vegeta.attack(
            vegeta,
            url,
            rate=PROBE_RATE,
            seconds=PROBE_SECONDS,
            workdir=workdir,
            sent=lambda: marks.append(onenode.counters(online_uid, [])),
        ),
    )
    before, after = marks
    online = onenode.cpu_percent(before, after)["online_cpu_percent"]
    rate = PROBE_RATE if online <= 0 else round(PROBE_RATE * TARGET_ONLINE_PERCENT / online, -2)
    rate = int(min(max(rate, 100), 20_000))
    say(f"calibration: {PROBE_RATE} req/s used {online:.1f}% of the node's CPU -> {rate} req/s")
    return {
        "probe_rate": PROBE_RATE,
        "probe_online_cpu_percent": online,
        "rate": rate,
        "probe_p99_ms": report.p99_ms,
        "target_online_cpu_percent": TARGET_ONLINE_PERCENT,
    }


class Rig:
    """The node's nodeqos state across arms: installed or not, its policy and gates."""

    def __init__(self, c: Cluster, image: str, say: Say) -> None:
        self.c, self.image, self.say = c, image, say
        self.installed: Arm | None = None

    def enter(self, arm: Arm) -> None:
        kube, state = self.c.kube, self.c.workdir / "nodeqos-state"
        if not arm.nodeqos:
            if self.installed is not None:
                started = time.monotonic()
                qos.remove(kube, self.image, state)
                self.say(f"  nodeqos removed ({time.monotonic() - started:.0f}s)")
                self.installed = None
            return
        started = time.monotonic()
        if self.installed is None:
            qos.install(kube, self.c.plane, self.image, state, policy=arm.policy, gates=arm.gates)
            self.say(f"  nodeqos installed ({time.monotonic() - started:.0f}s)")
        else:
            if arm.gates != self.installed.gates:
                qos.set_gates(kube, arm.gates)
                self.say(
                    f"  agent restarted with gates {arm.gates or 'default'} "
                    f"({time.monotonic() - started:.0f}s)"
                )
            if arm.policy != self.installed.policy:
                qos.set_policy(kube, arm.policy)
            qos.wait_batch_room(kube)
        self.installed = arm

    def close(self) -> None:
        if self.installed is not None:
            with contextlib.suppress(Exception):
                qos.remove(self.c.kube, self.image, self.c.workdir / "nodeqos-state")


def measure(
    rig: Rig,
    arm: Arm,
    vegeta: Path,
    url: str,
    online_uid: str,
    rate: int,
    options: Options,
    number: int,
) -> dict[str, Any]:
    kube = rig.c.kube
    start("nodeqos", lambda: rig.enter(arm))
    if arm.batch:
        onenode.start_batch(kube, batch=arm.nodeqos)
    try:
        time.sleep(options.warmup)
        uids = onenode.nodeqos_pod_uids(kube)
        load = os.getloadavg()[0]
        marks = [onenode.counters(online_uid, uids)]
        report = start(
            "generator",
            lambda: _vegeta.attack(
                vegeta,
                url,
                rate=rate,
                seconds=options.seconds,
                workdir=rig.c.workdir / "vegeta",
                sent=lambda: marks.append(onenode.counters(online_uid, uids)),
            ),
        )
        before, after = marks
        requests = onenode.batch_requests(kube, batch=arm.nodeqos) if arm.batch else {}
        be_state = onenode.besteffort_state()
    finally:
        if arm.batch:
            onenode.stop_batch(kube, batch=arm.nodeqos)
    return {
        "round": number,
        "arm": arm.number,
        "arm_name": arm.name,
        "at": time.strftime("%H:%M:%S", time.gmtime()),
        **onenode.cpu_percent(before, after),
        **report.to_json(),
        "batch_pod_requests": requests,
        "besteffort": be_state,
        "load_average_1m": round(load, 2),
    }
