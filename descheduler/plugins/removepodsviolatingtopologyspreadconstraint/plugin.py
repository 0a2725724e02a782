"""RemovePodsViolatingTopologySpreadConstraint: moves pods out of topology domains
that hold more than the global minimum + maxSkew.

Per namespace (constraints count only their own namespace's pods), each
cycle:

1. Count every distinct `spread.Spread` of the namespace's pods over the
   cycle's nodes (`spread.Domains`), arrivals projected by earlier plugins
   included.
2. The spreads to balance come from pods within `namespaces` and
   `labelSelector` whose `whenUnsatisfiable` is listed in `constraints`, in
   the order their first pod sorts. Pick the first that has a domain above
   minimum + maxSkew (fullest domain first), try to move one pod out of that
   domain, and repeat. A (spread, domain) where no pod can move is not
   tried again this cycle. Pods in domains within maxSkew are never touched.
3. A candidate is a pod in that domain carrying that same constraint, tried
   in `candidate_key` order and only if the evictor's filter lets it
   through. It moves only to a node whose domain would then be within
   maxSkew for EVERY hard constraint of the pod and every soft one being
   balanced, judged together with the pod taken out of its own domains
   (upstream balances each constraint on its own and can evict a pod that
   another constraint sends straight back: #1219, PR #1918). Nodes in the
   emptiest domains are tried first. With `topologyBalanceNodeFit` (default
   on) the pod must also fit the node (`kube.scheduling.pod_fits_node`,
   projected requests). The node found is handed to the evictor as the
   destination, so every count and later plugin sees the move.
4. A candidate with no such node ends with `no_fit` (a node would keep the
   spread but the pod does not fit it) or `no_destination` (no node keeps
   every constraint within maxSkew); one the evictor refuses ends with the
   evictor's reason.

Upstream also decides how many pods each domain gives up from the ideal
average before evicting; moving one pod at a time towards the emptiest
domain reaches the same counts (a domain stops giving once it is within
minimum + maxSkew) and lets every move see the previous ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from descheduler.config import PluginArgs
from descheduler.framework import Handle, Reason, Refusal, Snapshot
from descheduler.plugins.removepodsviolatingtopologyspreadconstraint import spread
from descheduler.plugins.removepodsviolatingtopologyspreadconstraint.args import (
    RemovePodsViolatingTopologySpreadConstraintArgs,
)
from kube import objects, scheduling

NAME = "RemovePodsViolatingTopologySpreadConstraint"
_FIT_REASONS_SHOWN = 3
_FINISHED = frozenset({"Succeeded", "Failed"})

Args = RemovePodsViolatingTopologySpreadConstraintArgs


def candidate_key(pod: objects.Pod) -> tuple[int, int, float, str, str, str]:
    """Which pod of a crowded domain moves first: a total order.

    Upstream's preference, kept: pods without a nodeSelector or node affinity
    first (they have the most places to go), then lower priority. Then the
    youngest, then namespace, name and UID.
    """
    pinned = bool(pod.node_selector) or pod.required_node_affinity is not None
    created = pod.creation_timestamp
    return (
        int(pinned),
        pod.priority or 0,
        math.inf if created is None else -created.timestamp(),
        pod.namespace,
        pod.name,
        pod.uid,
    )


@dataclass(slots=True)
class _Namespace:
    """One namespace's counts for the cycle, kept current as pods move."""

    nodes: Sequence[objects.Node]
    placed: dict[str, list[objects.Pod]]  # node -> pods counted there
    spreads: dict[str, tuple[spread.Spread, ...]]  # pod uid -> its spreads
    tables: dict[spread.Spread, spread.Domains] = field(default_factory=dict)

    def domains(self, of: spread.Spread) -> spread.Domains:
        found = self.tables.get(of)
        if found is None:
            found = self.tables[of] = spread.Domains.count(of, self.nodes, self.placed)
        return found

    def move(self, pod: objects.Pod, destination: str) -> None:
        self.placed[pod.node_name].remove(pod)
        self.placed.setdefault(destination, []).append(pod)
        for table in self.tables.values():
            table.move(pod, pod.node_name, destination)


class _Stop(Exception):
    """The evictor's total (or this namespace's) limit is reached."""


class RemovePodsViolatingTopologySpreadConstraint:
    """Upstream's topology spread balance plugin on the nodeqos framework."""

    name = NAME

    def __init__(self, args: Args, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.balanced = frozenset(c.value for c in args.constraints)

    def balance(self, snapshot: Snapshot) -> None:
        by_namespace: dict[str, dict[str, list[objects.Pod]]] = {}
        for node in snapshot.nodes:
            for pod in (*snapshot.pods_on(node.name), *snapshot.arrivals(node.name)):
                if pod.phase not in _FINISHED and not pod.is_terminating:
                    by_namespace.setdefault(pod.namespace, {}).setdefault(node.name, []).append(pod)
        for namespace in sorted(by_namespace):
            placed = by_namespace[namespace]
            pods = sorted((p for ps in placed.values() for p in ps), key=lambda p: (p.name, p.uid))
            if not any(p.topology_spread_constraints for p in pods):
                continue
            state = _Namespace(
                snapshot.nodes,
                placed,
                {p.uid: spread.spreads_of(p) for p in pods if p.topology_spread_constraints},
            )
            try:
                self._balance_namespace(snapshot, state, pods)
            except _Stop:
                if self.handle.evictor.total_limit_reached():
                    return

    def _balance_namespace(
        self, snapshot: Snapshot, state: _Namespace, pods: Sequence[objects.Pod]
    ) -> None:
        targets: dict[spread.Spread, None] = {}
        for pod in pods:
            if self.args.in_scope(pod) and not snapshot.is_evicted(pod):
                for each in state.spreads.get(pod.uid, ()):
                    if each.when_unsatisfiable in self.balanced:
                        targets.setdefault(each)
        exhausted: set[tuple[spread.Spread, str]] = set()
        done: set[str] = set()  # pods refused by the evictor: not asked again
        waiting: dict[str, tuple[objects.Pod, Refusal]] = {}  # latest "nowhere to go"
        try:
            while True:
                found = next(
                    (
                        (each, domain)
                        for each in targets
                        for domain in state.domains(each).violations()
                        if (each, domain) not in exhausted
                    ),
                    None,
                )
                if found is None:
                    break
                if not self._move_one(snapshot, state, *found, done, waiting):
                    exhausted.add(found)
        finally:
            for pod, refusal in waiting.values():
                self.handle.decisions.skip(pod, plugin=NAME, reason=refusal)

    def _move_one(
        self,
        snapshot: Snapshot,
        state: _Namespace,
        fixing: spread.Spread,
        domain: str,
        done: set[str],
        waiting: dict[str, tuple[objects.Pod, Refusal]],
    ) -> bool:
        """Move one pod of `fixing` out of `domain`; False when none can go."""
        table = state.domains(fixing)
        candidates = sorted(
            (
                pod
                for node, d in table.domain_of.items()
                if d == domain
                for pod in state.placed.get(node, ())
                if pod.uid not in done
                and not snapshot.is_evicted(pod)
                and fixing in state.spreads.get(pod.uid, ())
                and self.args.in_scope(pod)
            ),
            key=candidate_key,
        )
        evictor = self.handle.evictor
        for pod in candidates:
            if not evictor.evictable([pod], plugin=NAME):
                done.add(pod.uid)
                continue
            destination = self._destination(snapshot, state, pod, fixing)
            if isinstance(destination, Refusal):
                waiting[pod.uid] = (pod, destination)
                continue
            waiting.pop(pod.uid, None)
            count, floor = table.counts[domain], table.minimum()
            reason = (
                f"{fixing.topology_key}={domain} holds {count} pods matching {fixing.selector},"
                f" more than minimum {floor} + maxSkew {fixing.max_skew}"
            )
            if evictor.evict(pod, plugin=NAME, reason=reason, destination=destination.name):
                state.move(pod, destination.name)
                return True
            done.add(pod.uid)
            if evictor.total_limit_reached() or evictor.namespace_limit_reached(pod.namespace):
                raise _Stop
        return False

    def _destination(
        self, snapshot: Snapshot, state: _Namespace, pod: objects.Pod, fixing: spread.Spread
    ) -> objects.Node | Refusal:
        """The node the pod should move to, or why there is none."""
        table = state.domains(fixing)
        source = pod.node_name
        ceiling = table.counts[table.domain_of[source]] - 2  # the move must narrow the gap
        judged = [
            state.domains(s)
            for s in state.spreads[pod.uid]
            if s.hard or s.when_unsatisfiable in self.balanced
        ]
        nodes = sorted(
            (
                n
                for n in state.nodes
                if n.name != source
                and n.name in table.domain_of
                and table.counts[table.domain_of[n.name]] <= ceiling
            ),
            key=lambda n: (table.counts[table.domain_of[n.name]], table.domain_of[n.name], n.name),
        )
        misfits = []
        for node in nodes:
            if not all(spread.admits(d, pod, source, node) for d in judged):
                continue
            if not self.args.topology_balance_node_fit:
                return node
            fit = scheduling.pod_fits_node(pod, node, snapshot.requested(node.name))
            if fit.ok:
                return node
            misfits.append(f"{node.name}: {', '.join(fit.reasons)}")
        if misfits:
            shown = "; ".join(misfits[:_FIT_REASONS_SHOWN])
            more = len(misfits) - _FIT_REASONS_SHOWN
            detail = f"fits no node of a smaller domain ({shown}"
            detail += f"; {more} more)" if more > 0 else ")"
            return Refusal(Reason.NO_FIT, detail, NAME)
        return Refusal(
            Reason.NO_DESTINATION,
            "no node of a smaller domain keeps every spread constraint of the pod within maxSkew",
            NAME,
        )


def factory(args: PluginArgs, handle: Handle) -> RemovePodsViolatingTopologySpreadConstraint:
    return RemovePodsViolatingTopologySpreadConstraint(Args.narrow(args, NAME), handle)
