"""CustomPriority: pods move from expensive node levels to cheaper ones.

Koordinator v1.8 (`pkg/descheduler/framework/plugins/custompriority/custom_priority.go`,
facts only). Each cycle:

1. The nodes the top-level `nodeSelector` picks are put in the first
   `evictionOrder` level whose `nodeSelector` matches them (a node matching
   none is ignored). Levels without nodes are dropped; with fewer than two
   left, nothing moves.
2. Each level in order is a source; every later level's nodes are its
   targets, in level order then by name.
3. A source node's candidates are its pods in `evictableNamespaces`, matching
   any `podSelectors` (none: all), that pass the evictor's filters; they are
   tried smallest request first (cpu, memory, namespace, name).
4. `BestEffort` (default): a candidate is evicted when a target takes it (the
   scheduler's predicates with the requests projected so far this cycle); the
   first target that does is the eviction's destination. After 5 candidates
   in a row fit nowhere the node is left (upstream's early stop).
5. `DrainNode`: a source node is emptied only when ALL its candidates fit the
   targets together (each placement reserves its requests for the next);
   otherwise none of its pods moves. With `autoCordon` the node is cordoned
   before its pods are evicted, and uncordoned if an eviction fails.

`paused` makes the plugin do nothing; the plugin's own `dryRun` decides and
records but evicts nothing (the framework's dry run is separate and makes
every plugin pretend).

Where nodeqos differs: a pod is evicted only when a named target takes it,
`nodeFit: false` included (upstream then evicts without looking: docs/design.md,
"Beyond the reference": no eviction when no destination exists); autoCordon
uncordons only a node it cordoned itself (upstream also uncordons a node someone
else had cordoned).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from descheduler.config import PluginArgs
from descheduler.framework import Handle, Reason, Refusal, Snapshot
from descheduler.plugins.custompriority.args import CustomPriorityArgs, Mode
from kube import objects, quantity, rest, scheduling

NAME = "CustomPriority"
MAX_CONSECUTIVE_MISSES = 5
_FINISHED = frozenset({"Succeeded", "Failed"})

log = logging.getLogger(__name__)


def size_key(pod: objects.Pod) -> tuple[int, int, str, str]:
    """Smallest request first: cpu, memory, then namespace and name."""
    return (
        pod.requests.get(quantity.CPU, 0),
        pod.requests.get(quantity.MEMORY, 0),
        pod.namespace,
        pod.name,
    )


def levels(
    args: CustomPriorityArgs, nodes: Iterable[objects.Node]
) -> list[tuple[str, list[objects.Node]]]:
    """The non-empty levels in `evictionOrder`, each with its nodes by name."""
    grouped: dict[str, list[objects.Node]] = {level.name: [] for level in args.eviction_order}
    for node in sorted(nodes, key=lambda n: n.name):
        if args.node_selector is not None and not args.node_selector.matches(node.labels):
            continue
        for level in args.eviction_order:
            if level.node_selector is not None and level.node_selector.matches(node.labels):
                grouped[level.name].append(node)
                break
    return [(name, found) for name, found in grouped.items() if found]


class CustomPriority:
    """Koordinator's CustomPriority balance plugin on the nodeqos framework."""

    name = NAME

    def __init__(self, args: CustomPriorityArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle

    def _note(self, reason: Reason, detail: str, node: str = "") -> None:
        self.handle.decisions.note(reason, detail, plugin=NAME, node=node)

    def balance(self, snapshot: Snapshot) -> None:
        if self.args.paused:
            self._note(Reason.NOT_SOURCE, "paused")
            return
        found = levels(self.args, snapshot.nodes)
        if len(found) < 2:
            self._note(
                Reason.NO_DESTINATION,
                f"{len(found)} evictionOrder level(s) have nodes; at least 2 are needed",
            )
            return
        for index, (level, sources) in enumerate(found[:-1]):
            targets = [node for _, nodes in found[index + 1 :] for node in nodes]
            for source in sources:
                drain = self._drain if self.args.mode is Mode.DRAIN_NODE else self._best_effort
                if not drain(snapshot, level, source, targets):
                    return

    # -- candidates ----------------------------------------------------------------

    def _candidates(self, snapshot: Snapshot, source: objects.Node) -> list[objects.Pod]:
        in_scope = []
        for pod in snapshot.pods_on(source.name):
            if pod.phase in _FINISHED:
                continue
            detail = self._out_of_scope(pod)
            if detail:
                self.handle.decisions.skip(
                    pod, plugin=NAME, reason=Refusal(Reason.FILTERED, detail, NAME)
                )
            else:
                in_scope.append(pod)
        passed = self.handle.evictor.evictable(in_scope, plugin=NAME)
        return sorted(passed, key=size_key)

    def _out_of_scope(self, pod: objects.Pod) -> str:
        namespaces = self.args.evictable_namespaces
        if namespaces is not None and not namespaces.allows(pod.namespace):
            return f"namespace {pod.namespace} is not in evictableNamespaces"
        chosen = [s.selector for s in self.args.pod_selectors if s.selector is not None]
        if chosen and not any(s.matches(pod.labels) for s in chosen):
            return "matches none of podSelectors"
        return ""

    # -- BestEffort ----------------------------------------------------------------

    def _best_effort(
        self, snapshot: Snapshot, level: str, source: objects.Node, targets: Sequence[objects.Node]
    ) -> bool:
        """Evict each candidate a target takes; False once the total limit is reached."""
        misses = 0
        for pod in self._candidates(snapshot, source):
            target = _first_fit(pod, targets, lambda name: snapshot.requested(name))
            if target is None:
                self.handle.decisions.skip(
                    pod, plugin=NAME, reason=Reason.NO_FIT, detail="fits no cheaper node"
                )
                misses += 1
                if misses >= MAX_CONSECUTIVE_MISSES:
                    self._note(
                        Reason.NO_FIT,
                        f"{misses} pods in a row fit no cheaper node; node left",
                        node=source.name,
                    )
                    return True
                continue
            misses = 0
            reason = f"evicting from {level} priority resource to lower priority resource"
            if not self._evict(pod, reason, target) and self.handle.evictor.total_limit_reached():
                return False
        return True

    # -- DrainNode -----------------------------------------------------------------

    def _drain(
        self, snapshot: Snapshot, level: str, source: objects.Node, targets: Sequence[objects.Node]
    ) -> bool:
        """Empty the node when all its candidates fit; False once the total limit is reached."""
        pods = self._candidates(snapshot, source)
        if not pods:
            return True
        reserved: dict[str, quantity.Resources] = {}

        def requested(name: str) -> quantity.Resources:
            return snapshot.requested(name) + reserved.get(name, quantity.Resources())

        plan: list[tuple[objects.Pod, objects.Node]] = []
        for pod in pods:
            target = _first_fit(pod, targets, requested)
            if target is None:
                self.handle.decisions.skip(
                    pod, plugin=NAME, reason=Reason.NO_FIT, detail="fits no cheaper node"
                )
                self._note(
                    Reason.NO_DESTINATION,
                    f"not drained: pod {pod.key} fits no cheaper node",
                    node=source.name,
                )
                return True
            reserved[target.name] = reserved.get(target.name, quantity.Resources()) + (
                pod.requests + quantity.Resources({quantity.PODS: 1})
            )
            plan.append((pod, target))
        cordoned = self.args.auto_cordon and self._cordon(source, True)
        reason = f"drain node {source.name} (sourcePriority={level})"
        for pod, target in plan:
            if not self._evict(pod, reason, target):
                if cordoned:
                    self._cordon(source, False)
                return not self.handle.evictor.total_limit_reached()
        return True

    # -- writes ----------------------------------------------------------------------

    def _evict(self, pod: objects.Pod, reason: str, target: objects.Node) -> bool:
        if self.args.dry_run:
            detail = f"args.dryRun: would evict towards node {target.name}: {reason}"
            self.handle.decisions.skip(
                pod, plugin=NAME, reason=Refusal(Reason.FILTERED, detail, NAME)
            )
            return True
        return self.handle.evictor.evict(pod, plugin=NAME, reason=reason, destination=target.name)

    def _cordon(self, node: objects.Node, unschedulable: bool) -> bool:
        """Set spec.unschedulable; True only when this call changed it."""
        client = self.handle.client
        if self.handle.dry_run or self.args.dry_run or client is None:
            return False
        if unschedulable and node.unschedulable:
            return False
        try:
            client.patch(f"/api/v1/nodes/{node.name}", {"spec": {"unschedulable": unschedulable}})
        except (rest.ApiError, rest.ApiUnavailable) as err:
            log.warning(
                "cannot %scordon node %s: %s", "" if unschedulable else "un", node.name, err
            )
            return False
        log.info("%scordoned node %s", "" if unschedulable else "un", node.name)
        return True


def _first_fit(
    pod: objects.Pod,
    targets: Sequence[objects.Node],
    requested: Callable[[str], quantity.Resources],
) -> objects.Node | None:
    for node in targets:
        if scheduling.pod_fits_node(pod, node, requested(node.name)):
            return node
    return None


def factory(args: PluginArgs, handle: Handle) -> CustomPriority:
    return CustomPriority(CustomPriorityArgs.narrow(args, NAME), handle)
