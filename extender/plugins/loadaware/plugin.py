"""The LoadAwareScheduling plugin object: the framework's extension points over a ClusterView.

The view does the work over the whole list of names at once (per-estimate
answer caches, precomputed per-node rows); this class only adapts it:
pre_filter projects the pod (its state at both points), filter returns the
view's refusals, score its 0..100 scores, and assume counts the pod on the
nodes the framework expects it on (the burst problem, `extender.view`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from extender import view as viewmod
from extender.args import LoadAwareArgs
from extender.framework import interfaces
from extender.loads import PodLoad
from kube import cache

_BAD_POD = (ValueError, KeyError, TypeError, AttributeError, IndexError)


class LoadAwareScheduling:
    """Filter, score and assume over one `ClusterView`."""

    __slots__ = ("view",)

    def __init__(self, view: viewmod.ClusterView) -> None:
        self.view = view

    def pre_filter(self, pod: interfaces.Pod) -> PodLoad:
        try:
            return self.view.project_pod(pod)
        except _BAD_POD as err:  # anyone who reaches the port can post any JSON
            raise interfaces.InvalidPod(f"Pod: not a valid v1.Pod ({err})") from None

    def filter(self, state: PodLoad, names: Sequence[str]) -> Mapping[str, str]:
        verdict = self.view.filter(state, names, expect=False)
        return interfaces.Refusals(verdict.failed, verdict.passed) if verdict.failed else {}

    def score(self, state: PodLoad, names: Sequence[str]) -> list[int]:
        return self.view.scores(state, names)

    def assume(self, state: PodLoad, names: Sequence[str]) -> None:
        self.view.expect(state, names)


def _gauge(registry: CollectorRegistry, view: viewmod.ClusterView) -> None:
    expected = Gauge(
        "nodeqos_extender_expected_pods",
        "Pods counted on the node the extender pointed them to, before their binding is seen.",
        registry=registry,
    )
    expected.set_function(lambda: view.expectations)
    registry.register(_Sources(view))


class _Sources(Collector):
    """`nodeqos_extender_nodes{source}`: what each node's load is read from right now."""

    def __init__(self, view: viewmod.ClusterView) -> None:
        self._view = view

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "nodeqos_extender_nodes",
            "Nodes by the source the filter judges their load on: metric, nodeUsage (the"
            " aggregate is not reported yet), or estimate-* (nothing measured: the pods'"
            " estimates; the suffix says why).",
            labels=["source"],
        )
        for source, count in self._view.sources().items():
            family.add_metric([source.value], count)
        yield family


def wrap(view: viewmod.ClusterView, registry: CollectorRegistry) -> LoadAwareScheduling:
    """The plugin over an existing view (its series registered), for tests and the benchmark."""
    _gauge(registry, view)
    return LoadAwareScheduling(view)


def factory(args: LoadAwareArgs, handle: interfaces.Handle) -> LoadAwareScheduling:
    view = viewmod.ClusterView(args, clock=handle.clock)
    handle.watch(cache.NODES, project=view.project_node, on_event=view.on_node)
    handle.watch(cache.NODEMETRICS, project=view.project_metric, on_event=view.on_metric)
    # Only bound pods weigh on a node: a pending pod's events (half of a burst's)
    # would cost decoding and nothing else. A pod arrives as ADDED when bound.
    handle.watch(
        cache.PODS,
        project=view.project_pod,
        on_event=view.on_pod,
        field_selector="spec.nodeName!=",
    )
    return wrap(view, handle.registry)
