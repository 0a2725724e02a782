"""`Framework`: runs a profile's plugins for one filter or prioritize call, each isolated.

Filter: each filter plugin, in profile order, judges the nodes the earlier ones
let through (kube-scheduler stops at a node's first failing filter too); the
refusals become `FailedNodes`. Score: each score plugin scores the names, its
NormalizeScore (if any) brings them into [0, 100], and the weighted mean is
rounded to the extender protocol's 0..10. With one score plugin that is a table
lookup per node (which checks the range as it goes), so the framework adds no
Python-level work per node.

Isolation (the only broad catches of the extender, besides the server's): a
plugin that raises is logged with its name and point and counted in
`nodeqos_extender_plugin_errors_total{plugin,point}`; the pod is answered by the
others, as if the plugin were not enabled - unless it is a filter marked
`required`, which then refuses every node it was asked about with the failure as
the reason (the pod stays Pending and its FailedScheduling event says why). A
score plugin answering the wrong number of scores, or scores outside [0, 100],
is a failure too. `InvalidPod` from a pre_filter/pre_score is no failure of the
plugin: the request is answered 400.

Per-pod state: kube-scheduler posts filter, then prioritize, about the same pod
version; each plugin's pre_filter/pre_score state is computed once and kept for
the last pod (uid, resourceVersion) seen.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from extender.framework.interfaces import (
    MAX_EXTENDER_PRIORITY,
    MAX_NODE_SCORE,
    AssumePlugin,
    FilterPlugin,
    InvalidPod,
    Pod,
    PreFilterPlugin,
    PreScorePlugin,
    Refusals,
    ScoreExtensions,
    ScorePlugin,
)

log = logging.getLogger(__name__)

# A tie wider than this spreads a pod so thinly that expecting it anywhere is noise.
MAX_ASSUMED_TIES = 8
# score 0..100 -> the extender's 0..10, rounded half up; a dict, so that mapping a
# plugin's scores through it also checks them (anything outside 0..100 is a KeyError)
_TENTHS = {
    s: (s * MAX_EXTENDER_PRIORITY * 2 + MAX_NODE_SCORE) // (2 * MAX_NODE_SCORE)
    for s in range(MAX_NODE_SCORE + 1)
}
_OUT_OF_RANGE = f"a score outside [0, {MAX_NODE_SCORE}]"
_UNSET = object()


@dataclass(frozen=True, slots=True)
class Slot:
    """One enabled plugin: its object and what it implements."""

    name: str
    plugin: object
    weight: int = 1
    required: bool = False

    def pre(self, score: bool) -> Callable[[Pod], Any] | None:
        plugin = self.plugin
        if score and isinstance(plugin, PreScorePlugin):
            return plugin.pre_score
        if isinstance(plugin, PreFilterPlugin):
            return plugin.pre_filter
        return None


class _Cycle:
    """One pod version's per-plugin states (threads replace it whole; a race computes twice)."""

    __slots__ = ("key", "pod", "states")

    def __init__(self, key: tuple[str, str], pod: Pod) -> None:
        self.key = key
        self.pod = pod
        self.states: dict[tuple[str, bool], Any] = {}


class Framework:
    """The profile's plugins, built; `filter` and `prioritize` answer one call each."""

    def __init__(
        self,
        filters: Sequence[Slot],
        scores: Sequence[Slot],
        registry: CollectorRegistry,
    ) -> None:
        for slot in filters:
            if not isinstance(slot.plugin, FilterPlugin):
                raise TypeError(
                    f"scheduler plugin {slot.name} is enabled at filter but has no filter()"
                )
        for slot in scores:
            if not isinstance(slot.plugin, ScorePlugin):
                raise TypeError(
                    f"scheduler plugin {slot.name} is enabled at score but has no score()"
                )
        self.filters = tuple(filters)
        self.scores = tuple(scores)
        self._pre = {(s.name, b): s.pre(b) for s in (*filters, *scores) for b in (False, True)}
        # A plugin without pre_score shares its pre_filter state: one key for both points.
        self._keys = {
            (s.name, b): (s.name, b and isinstance(s.plugin, PreScorePlugin))
            for s in (*filters, *scores)
            for b in (False, True)
        }
        by_name = {s.name: s for s in (*filters, *scores)}
        self._assumers = tuple(s for s in by_name.values() if isinstance(s.plugin, AssumePlugin))
        self._normalizers = {s.name for s in scores if isinstance(s.plugin, ScoreExtensions)}
        self._weight = sum(s.weight for s in scores)
        self._last: _Cycle | None = None
        self.errors = Counter(
            "nodeqos_extender_plugin_errors",
            "Scheduler plugin calls that raised or answered out of contract, by plugin and point.",
            ["plugin", "point"],
            registry=registry,
        )

    # -- per-pod state ------------------------------------------------------------

    def _cycle(self, pod: Pod) -> _Cycle:
        meta = pod["metadata"]
        key = (str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""))
        seen = self._last  # one read: handler threads replace it whole
        # the same decoded pod (the server reuses a byte-identical body's), or the same version
        if seen is not None and (seen.pod is pod or (seen.key == key and key[0] and key[1])):
            return seen
        cycle = _Cycle(key, pod)
        self._last = cycle
        return cycle

    def _state(self, cycle: _Cycle, slot: Slot, score: bool) -> Any:
        states = cycle.states
        key = self._keys[slot.name, score]
        state = states.get(key, _UNSET)
        if state is _UNSET:
            pre = self._pre[slot.name, score]
            state = cycle.pod if pre is None else pre(cycle.pod)  # InvalidPod propagates
            states[key] = state
        return state

    def _failed(self, slot: Slot, point: str, err: BaseException | str) -> None:
        self.errors.labels(slot.name, point).inc()
        if isinstance(err, BaseException):
            log.error("scheduler plugin %s failed at %s", slot.name, point, exc_info=err)
        else:
            log.error("scheduler plugin %s failed at %s: %s", slot.name, point, err)

    def _assume(self, cycle: _Cycle, names: Sequence[str], score: bool) -> None:
        for slot in self._assumers:
            try:
                slot.plugin.assume(self._state(cycle, slot, score), names)  # type: ignore[attr-defined]
            except InvalidPod:
                pass
            except Exception as err:  # isolate: an assumption is an optimisation
                self._failed(slot, "assume", err)

    # -- verbs ------------------------------------------------------------------------

    def filter(self, pod: Pod, names: Sequence[str]) -> tuple[list[str], dict[str, str]]:
        """(nodes that pass, refused node -> reason). Raises InvalidPod for a malformed pod."""
        cycle = self._cycle(pod)
        left: Sequence[str] = names
        failed: dict[str, str] = {}
        for slot in self.filters:
            try:
                state = self._state(cycle, slot, False)  # PreFilter runs even with no node left
                if not left:
                    continue
                refused: Mapping[str, str] = slot.plugin.filter(state, left)  # type: ignore[attr-defined]
            except InvalidPod:
                raise
            except Exception as err:
                self._failed(slot, "filter", err)
                if not slot.required:
                    continue
                why = f"scheduler plugin {slot.name} (a required filter) failed: {err}"
                refused = dict.fromkeys(left, why)
            if refused:
                if isinstance(refused, Refusals):  # the plugin kept the order: trust it
                    failed.update(refused)
                    left = refused.passed
                else:
                    failed.update({n: str(refused[n]) for n in left if n in refused})
                    left = [n for n in left if n not in refused]
        passed = left if isinstance(left, list) else list(left)  # names is the request's own list
        if len(passed) == 1:  # kube-scheduler skips prioritize for a single candidate
            self._assume(cycle, passed, False)
        return passed, failed

    def _scores(
        self, cycle: _Cycle, slot: Slot, names: Sequence[str], *, check_range: bool = True
    ) -> Sequence[int] | None:
        try:
            state = self._state(cycle, slot, True)
            scores = slot.plugin.score(state, names)  # type: ignore[attr-defined]
            if slot.name in self._normalizers:
                scores = slot.plugin.normalize_score(state, names, scores)  # type: ignore[attr-defined]
        except InvalidPod:
            raise
        except Exception as err:
            self._failed(slot, "score", err)
            return None
        if len(scores) != len(names):
            self._failed(slot, "score", f"{len(scores)} scores for {len(names)} nodes")
            return None
        if check_range and scores and not (min(scores) >= 0 and max(scores) <= MAX_NODE_SCORE):
            self._failed(slot, "score", _OUT_OF_RANGE)
            return None
        checked: Sequence[int] = scores
        return checked

    def prioritize(self, pod: Pod, names: Sequence[str]) -> list[tuple[str, int]]:
        """(name, 0..10) per name. Raises InvalidPod for a malformed pod."""
        cycle = self._cycle(pod)
        final: list[int]
        if len(self.scores) == 1:  # one pass: the mapping to 0..10 checks the range too
            slot = self.scores[0]
            scores = self._scores(cycle, slot, names, check_range=False)
            try:
                final = (
                    [0] * len(names) if scores is None else list(map(_TENTHS.__getitem__, scores))
                )
            except (KeyError, TypeError):
                self._failed(slot, "score", _OUT_OF_RANGE)
                final = [0] * len(names)
        else:
            totals = [0] * len(names)
            weight = 0
            for slot in self.scores:
                scores = self._scores(cycle, slot, names)
                if scores is not None:
                    w = slot.weight
                    totals = [t + w * s for t, s in zip(totals, scores, strict=True)]
                    weight += w
            if weight:
                # round(total / weight / 10), half up, in integers
                half, den = weight * MAX_NODE_SCORE, 2 * weight * MAX_NODE_SCORE
                top = 2 * MAX_EXTENDER_PRIORITY
                final = [(t * top + half) // den for t in totals]
            else:
                final = [0] * len(names)
        best = max(final, default=0)
        if best > 0 and final.count(best) <= MAX_ASSUMED_TIES:
            self._assume(cycle, [n for n, s in zip(names, final, strict=True) if s == best], True)
        return list(zip(names, final, strict=True))


def build(profile: Any, plugins: Any, handle: Any) -> Framework:
    """The profile's plugins built by their factories (each once, shared by its points).

    `profile` is a `config.Profile`, `plugins` the `registry.Registry` it was
    decoded against. A factory that raises, or a plugin object lacking the method
    of a point it is enabled at, is an ArgsError naming the plugin.
    """
    from extender.framework.interfaces import ArgsError

    built: dict[str, object] = {}
    problems = []
    for name in profile.plugins:
        entry = plugins.get(name)
        try:
            built[name] = entry.factory(profile.args[name], handle)
        except Exception as err:  # a third party's factory: report it, do not crash
            problems.append(
                f"scheduler plugin {name}: its factory failed: {type(err).__name__}: {err}"
            )
    if problems:
        raise ArgsError(problems)
    filters = [Slot(e.name, built[e.name], required=e.required) for e in profile.filter]
    scores = [Slot(e.name, built[e.name], weight=e.weight) for e in profile.score]
    try:
        return Framework(filters, scores, handle.registry)
    except TypeError as err:
        raise ArgsError([str(err)]) from None
