"""An example QoS extension plugin: counts the best-effort pods on the node."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import click

import metriccache
import qosmanager
from kube import classify, rest

log = logging.getLogger(__name__)

NAME = "BEPodCounter"


class BEPodCounter:
    """Logs how many best-effort pods the node runs, every --be-pod-counter-interval s."""

    def __init__(self) -> None:
        self.interval = 10.0
        self.counts: list[int] = []
        self._states: qosmanager.States | None = None

    def init_flags(self) -> Sequence[click.Parameter]:
        def store(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
            self.interval = value
            return value

        return [
            click.Option(
                ["--be-pod-counter-interval"],
                type=float,
                default=self.interval,
                expose_value=False,  # the callback configures the plugin
                callback=store,
                help="Seconds between two counts.",
            )
        ]

    def setup(
        self, client: rest.Rest, metric_cache: metriccache.MetricCache, states: qosmanager.States
    ) -> None:
        self._states = states  # raising here would stop the agent, naming this plugin

    def run(self, stop: threading.Event) -> None:
        assert self._states is not None, "run before setup"
        while not stop.is_set():  # an exception here is logged, counted and restarted
            pods = self._states.pods()
            count = sum(1 for pod in pods if pod.qos is classify.KoordQOS.BE)
            self.counts.append(count)
            log.info("%d best-effort pods on this node", count)
            stop.wait(self.interval)


# The surface the agent discovers through the entry point (qosmanager.discovery).
FEATURE = qosmanager.FeatureSpec(default=False, description="count best-effort pods")
factory = BEPodCounter


def register(registry: qosmanager.PluginRegistry) -> BEPodCounter:
    """Add the plugin to a registry by hand, off unless enabled by its gate."""
    plugin = factory()
    qosmanager.register_qos_ext_plugin(registry, NAME, FEATURE, plugin)
    return plugin
