"""The usage readers the daemon builds from the policy, handed to plugins.

Upstream builds its metrics collector when `metricsProviders` has
`source: KubernetesMetrics` (or the deprecated `metricsCollector.enabled`),
and its Prometheus client from the `source: Prometheus` provider's `url`,
with a bearer token from the Secret `authToken.secretReference` names (key
`prometheusAuthToken`, re-read so a rotated token is picked up:
`pkg/descheduler/prom_client_controller.go` at v0.36.0).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from descheduler.config import model
from descheduler.usagesources.metricsserver import MetricsServer
from descheduler.usagesources.podusage import MetricsReader
from descheduler.usagesources.prometheus import PrometheusClient
from kube import rest

log = logging.getLogger(__name__)

TOKEN_KEY = "prometheusAuthToken"


class SourceUnavailable(Exception):
    """A plugin asked for a source the policy does not configure."""


class QueryReader(Protocol):
    """`PrometheusClient`, or a test's fake."""

    def node_usage(self, query: str) -> dict[str, int]: ...


@dataclass(frozen=True, slots=True)
class Sources:
    """What the policy configured; None where it did not (or offline)."""

    metrics_server: MetricsReader | None = None
    prometheus: QueryReader | None = None


NONE = Sources()  # offline, or a policy without metricsProviders


def _secret_token(client: rest.Rest, namespace: str, name: str) -> Callable[[], str | None]:
    def token() -> str | None:
        try:
            secret = client.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")
        except rest.ApiError as err:
            log.warning("prometheus token: secret %s/%s: %s", namespace, name, err)
            return None
        data = (secret or {}).get("data") or {}
        encoded = data.get(TOKEN_KEY)
        if not encoded:
            log.warning("prometheus token: secret %s/%s has no %s", namespace, name, TOKEN_KEY)
            return None
        return base64.b64decode(encoded).decode().strip()

    return token


def from_policy(
    cfg: model.DeschedulerConfiguration, client: rest.Rest | None, *, clock: Callable[[], float]
) -> Sources:
    """The readers `cfg.metricsProviders` (or `metricsCollector`) ask for; none offline."""
    if client is None:
        return Sources()
    metrics_server = None
    prometheus = None
    collector = cfg.metrics_collector
    if collector is not None and collector.enabled:
        metrics_server = MetricsServer(client)
    for provider in cfg.metrics_providers:
        if provider.source is model.MetricsSource.KUBERNETES_METRICS:
            metrics_server = MetricsServer(client)
        elif provider.source is model.MetricsSource.PROMETHEUS and provider.prometheus:
            settings = provider.prometheus
            token: Callable[[], str | None] = lambda: None  # noqa: E731
            ref = settings.auth_token.secret_reference if settings.auth_token else None
            if ref is not None:
                token = _secret_token(client, ref.namespace, ref.name)
            prometheus = PrometheusClient(settings.url, token=token, clock=clock)
    return Sources(metrics_server=metrics_server, prometheus=prometheus)
