"""The scheduler plugin surface: the extension points a plugin implements, and its Handle.

kube-scheduler's framework, cut to what the extender protocol carries: kube-scheduler
calls the extender's `filter` and `prioritize` verbs with the pod and the names of
the candidate nodes (`nodeCacheCapable: true`), so a plugin works over that list
of names and answers for all of them at once: a filter returns the refused
nodes with a reason each, a score returns one integer per name, in order. There
is no per-node call: a Python call per node and plugin would cost more than the
work itself at 5,000 nodes.

Per-pod state replaces kube-scheduler's CycleState: `pre_filter(pod)` and
`pre_score(pod)` turn the raw v1.Pod into whatever the plugin needs, once per
pod (the framework keeps it from the filter call to the prioritize call of the
same pod version); a plugin without `pre_score` gets its `pre_filter` state at
score time, and one with neither gets the raw pod.

Who calls this: `extender.framework.runner.Framework`. Plugins are found by
`extender.framework.registry` through the entry-point group `GROUP`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from prometheus_client import CollectorRegistry

from kube import cache

GROUP = "nodeqos.scheduler.plugins"
MAX_NODE_SCORE = 100  # kube-scheduler's framework.MaxNodeScore: what a normalized score spans
MAX_EXTENDER_PRIORITY = 10  # extenderv1.MaxExtenderPriority: what the prioritize verb answers

Pod = Mapping[str, Any]  # a v1.Pod as the scheduler sent it
Reasons = Mapping[str, str]  # refused node name -> why, as FailedNodes carries it


class ExtensionPoint(enum.StrEnum):
    """The points a profile enables plugins at (`profiles[].plugins.<point>`)."""

    FILTER = "filter"
    SCORE = "score"


class Refusals(dict[str, str]):
    """A filter's refusals that also carry the names it let through, in request order.

    A plugin that builds that list anyway returns it here and saves the framework
    a pass over the names; a plain mapping is as good an answer.
    """

    __slots__ = ("passed",)

    def __init__(self, refused: Mapping[str, str], passed: list[str]) -> None:
        super().__init__(refused)
        self.passed = passed


class ArgsError(ValueError):
    """A config or a plugin's args are unusable; `problems` lists every reason, one per line,
    each "field.path: what is wrong (the fix)"."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class InvalidPod(ValueError):
    """Raised by a pre_filter/pre_score that cannot read the pod: the request is answered 400."""


@runtime_checkable
class PreFilterPlugin(Protocol):
    def pre_filter(self, pod: Pod) -> Any:
        """The plugin's state for this pod, computed once (raise InvalidPod for a malformed pod)."""


@runtime_checkable
class FilterPlugin(Protocol):
    def filter(self, state: Any, names: Sequence[str]) -> Reasons:
        """The nodes of `names` that cannot take the pod, each with its reason; empty when all can."""


@runtime_checkable
class PreScorePlugin(Protocol):
    def pre_score(self, pod: Pod) -> Any:
        """The plugin's scoring state for this pod (default: its pre_filter state)."""


@runtime_checkable
class ScorePlugin(Protocol):
    def score(self, state: Any, names: Sequence[str]) -> Sequence[int]:
        """One score per name, in order; in [0, MAX_NODE_SCORE] unless normalize_score maps them there."""


@runtime_checkable
class ScoreExtensions(Protocol):
    def normalize_score(
        self, state: Any, names: Sequence[str], scores: Sequence[int]
    ) -> Sequence[int]:
        """`scores` brought into [0, MAX_NODE_SCORE] (kube-scheduler's NormalizeScore)."""


@runtime_checkable
class AssumePlugin(Protocol):
    def assume(self, state: Any, names: Sequence[str]) -> None:
        """The pod is expected on one of `names` (the only node left, or the best scored).

        The extender never hears which node kube-scheduler chose (no Reserve); a
        plugin that keeps per-node accounting counts the pod there until the
        binding arrives through its watch. `state` is the pod's state of the
        point that decided.
        """


class Handle:
    """What a plugin's factory gets: the shared watches, the clock and the metrics registry.

    `watch` subscribes to a list-watch cache the extender runs; plugins that
    watch the same resource with the same field selector share one informer,
    each getting its own projection of every object.
    """

    __slots__ = ("_subscribe", "clock", "registry")

    def __init__(
        self,
        subscribe: Callable[..., None],
        *,
        clock: Callable[[], float],
        registry: CollectorRegistry,
    ) -> None:
        self._subscribe = subscribe
        self.clock = clock
        self.registry = registry

    def watch(
        self,
        resource: cache.Resource,
        *,
        project: Callable[[Mapping[str, Any]], Any],
        on_event: Callable[[str, Any, Any], None],
        field_selector: str | None = None,
    ) -> None:
        """Call `on_event(kind, old, new)` with `project(obj)` of every change to `resource`.

        A projection that raises leaves that object out for this plugin only.
        """
        self._subscribe(resource, project, on_event, field_selector)
