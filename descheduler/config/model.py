"""The typed DeschedulerConfiguration and its top-level parts.

Field names are Koordinator's `pkg/descheduler/apis/config/v1alpha2/types.go`
(DeschedulerConfiguration with component-base leader election and client
connection) plus the top-level fields of kubernetes-sigs/descheduler's
`DeschedulerPolicy` (`pkg/api/v1alpha2/types.go`), so files of either kind load.
Defaults are Koordinator's `SetDefaults_DeschedulerConfiguration` unless a comment
says why not.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType

from descheduler.config import codecs, fields, selectors
from descheduler.config.catalog import ExtensionPoint
from descheduler.config.selectors import LabelSelector
from kube.configstruct import Errors, FieldPath, Invalid


class ConfigKind(enum.StrEnum):
    """The `kind` of the document; it picks the default plugins (see `profiles`)."""

    KOORDINATOR = "DeschedulerConfiguration"
    UPSTREAM = "DeschedulerPolicy"


# The plugins a profile runs unless it disables them. Koordinator enables its
# MigrationController at evict and filter (`default_plugins.go`);
# kubernetes-sigs/descheduler always runs DefaultEvictor at filter and
# preEvictionFilter (`policyconfig.go`).
#
# MigrationController is not implemented yet, so for now BOTH kinds default to
# DefaultEvictor at filter, preEvictionFilter and evict (at evict it hands the
# pod to the eviction backend, which is what an empty evict point does too). A
# file that enables MigrationController explicitly still loads, and fails at
# start-up with "plugin MigrationController is not implemented yet".
# TODO(MigrationController): when it lands, switch the Koordinator kind back to
# {EVICT: ("MigrationController",), FILTER: ("MigrationController",)}.
_SAFE_DEFAULT_EVICTOR: Mapping[ExtensionPoint, tuple[str, ...]] = MappingProxyType(
    {
        ExtensionPoint.FILTER: ("DefaultEvictor",),
        ExtensionPoint.PRE_EVICTION_FILTER: ("DefaultEvictor",),
        ExtensionPoint.EVICT: ("DefaultEvictor",),
    }
)
DEFAULT_PLUGINS: Mapping[ConfigKind, Mapping[ExtensionPoint, tuple[str, ...]]] = MappingProxyType(
    {
        ConfigKind.KOORDINATOR: _SAFE_DEFAULT_EVICTOR,
        ConfigKind.UPSTREAM: _SAFE_DEFAULT_EVICTOR,
    }
)

# Eviction caps are on by default (docs/design.md, "Beyond the reference" 4: safe
# defaults); both references leave them unset (unlimited). As upstream
# (`evictions.go`: `count+1 > *max`), 0 means "evict nothing". A YAML null
# means "not set" here, as for any Go pointer field, so it gives the default,
# not "unlimited": to lift a cap, write a number larger than any cycle needs.
DEFAULT_MAX_PODS_TO_EVICT_PER_NODE = 5
DEFAULT_MAX_PODS_TO_EVICT_TOTAL = 20


@dataclass(frozen=True, kw_only=True, slots=True)
class LeaderElection:
    """component-base LeaderElectionConfiguration; Koordinator's defaults."""

    leader_elect: bool = field(default=True, metadata=fields.spec("leaderElect", codecs.BOOL))
    lease_duration: timedelta = field(
        default=timedelta(seconds=15), metadata=fields.spec("leaseDuration", codecs.DURATION)
    )
    renew_deadline: timedelta = field(
        default=timedelta(seconds=10), metadata=fields.spec("renewDeadline", codecs.DURATION)
    )
    retry_period: timedelta = field(
        default=timedelta(seconds=2), metadata=fields.spec("retryPeriod", codecs.DURATION)
    )
    resource_lock: str = field(
        default="leases", metadata=fields.spec("resourceLock", codecs.STRING)
    )
    resource_name: str = field(
        default="koord-descheduler", metadata=fields.spec("resourceName", codecs.STRING)
    )
    resource_namespace: str = field(
        default="koordinator-system", metadata=fields.spec("resourceNamespace", codecs.STRING)
    )

    def check(self, path: FieldPath, errors: Errors, failed: frozenset[str]) -> None:
        # component-base ValidateLeaderElectionConfiguration: only when enabled.
        if not self.leader_elect:
            return
        periods = (
            ("leaseDuration", self.lease_duration),
            ("renewDeadline", self.renew_deadline),
            ("retryPeriod", self.retry_period),
        )
        for key, period in periods:
            if key not in failed and period <= timedelta(0):
                errors.add(path.child(key), "must be greater than zero when leaderElect is true")
        if (
            not failed & {"leaseDuration", "renewDeadline"}
            and self.lease_duration < self.renew_deadline
        ):
            errors.add(path.child("leaseDuration"), "must not be shorter than renewDeadline")
        names = (
            ("resourceLock", self.resource_lock),
            ("resourceName", self.resource_name),
            ("resourceNamespace", self.resource_namespace),
        )
        for key, name in names:
            if not name:
                errors.add(path.child(key), "required when leaderElect is true")


@dataclass(frozen=True, kw_only=True, slots=True)
class ClientConnection:
    """component-base ClientConnectionConfiguration.

    qps/burst are Koordinator's (50/100). Koordinator defaults the content type to
    protobuf; the Python Kubernetes client speaks JSON only, so JSON is the
    default here (a protobuf value is accepted and has no effect).
    """

    kubeconfig: str = field(default="", metadata=fields.spec("kubeconfig", codecs.STRING))
    accept_content_types: str = field(
        default="application/json", metadata=fields.spec("acceptContentTypes", codecs.STRING)
    )
    content_type: str = field(
        default="application/json", metadata=fields.spec("contentType", codecs.STRING)
    )
    qps: float = field(default=50.0, metadata=fields.spec("qps", codecs.Number(minimum=0)))
    burst: int = field(default=100, metadata=fields.spec("burst", codecs.NON_NEGATIVE))


DEFAULT_PORT = 10251  # Koordinator's DefaultInsecureDeschedulerPort


class BindAddress(codecs.Codec[str]):
    """`host:port`, normalised as Koordinator does: `:10251` -> `0.0.0.0:10251`,
    a bare IP gets the default port."""

    __slots__ = ()

    def decode(self, raw: object, path: FieldPath, errors: Errors) -> str:
        if not isinstance(raw, str):
            raise Invalid(f"must be a host:port string, not {codecs.describe(raw)}")
        try:
            return f"{_format_host(ipaddress.ip_address(raw.strip('[]')))}:{DEFAULT_PORT}"
        except ValueError:
            pass
        match = re.fullmatch(r"(\[[^\]]*\]|[^:\[\]]*):(\d+)", raw)
        if match is None:
            raise Invalid(f"must be host:port (got {raw!r})")
        host, port = match.group(1), int(match.group(2))
        if port > 65535:
            raise Invalid(f"port {port} is out of range")
        if not host:
            host = "0.0.0.0"
        elif host.startswith("["):
            try:
                ipaddress.IPv6Address(host[1:-1])
            except ValueError:
                raise Invalid(f"invalid IPv6 host {host!r}") from None
        elif not re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?", host):
            raise Invalid(f"invalid host {host!r}")
        return f"{host}:{port}"

    def encode(self, value: str) -> object:
        return value


def _format_host(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    return f"[{address}]" if address.version == 6 else str(address)


class MetricsSource(enum.StrEnum):
    KUBERNETES_METRICS = "KubernetesMetrics"
    PROMETHEUS = "Prometheus"


@dataclass(frozen=True, kw_only=True, slots=True)
class SecretReference:
    namespace: str = field(default="", metadata=fields.spec("namespace", codecs.STRING))
    name: str = field(default="", metadata=fields.spec("name", codecs.STRING))


@dataclass(frozen=True, kw_only=True, slots=True)
class AuthToken:
    secret_reference: SecretReference | None = field(
        default=None, metadata=fields.spec("secretReference", fields.Nested(SecretReference))
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Prometheus:
    url: str = field(default="", metadata=fields.spec("url", codecs.STRING))
    auth_token: AuthToken | None = field(
        default=None, metadata=fields.spec("authToken", fields.Nested(AuthToken))
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class MetricsProvider:
    """Upstream `metricsProviders[]`; the checks are upstream's policy validation."""

    source: MetricsSource | None = field(
        default=None, metadata=fields.spec("source", codecs.Choice(MetricsSource))
    )
    prometheus: Prometheus | None = field(
        default=None, metadata=fields.spec("prometheus", fields.Nested(Prometheus))
    )

    def check(self, path: FieldPath, errors: Errors, failed: frozenset[str]) -> None:
        if self.source is not MetricsSource.PROMETHEUS or "prometheus" in failed:
            return
        if self.prometheus is None:
            errors.add(path.child("prometheus"), "required when source is Prometheus")
            return
        if not self.prometheus.url:
            errors.add(path.child("prometheus").child("url"), "required when source is Prometheus")
        token = self.prometheus.auth_token
        if token is not None:
            token_path = path.child("prometheus").child("authToken").child("secretReference")
            reference = token.secret_reference
            if reference is None:
                errors.add(token_path, "required when authToken is set")
            elif not (reference.name and reference.namespace):
                errors.add(token_path, "must set both namespace and name")


@dataclass(frozen=True, kw_only=True, slots=True)
class MetricsCollector:
    """Upstream's deprecated `metricsCollector` (use `metricsProviders`)."""

    enabled: bool = field(default=False, metadata=fields.spec("enabled", codecs.BOOL))


@dataclass(frozen=True, kw_only=True, slots=True)
class Profile:
    """One descheduling profile after merging the default plugins.

    `plugins` holds, for every extension point, the enabled plugin names in run
    order; `plugin_config` holds decoded Args for every enabled plugin (defaults
    when the file gave none) and for any other plugin the file configured.
    """

    name: str
    plugins: Mapping[ExtensionPoint, tuple[str, ...]]
    plugin_config: Mapping[str, fields.PluginArgs]
    node_selector: LabelSelector | None = None

    def enabled(self, point: ExtensionPoint) -> tuple[str, ...]:
        return self.plugins.get(point, ())

    def args(self, plugin: str) -> fields.PluginArgs:
        return self.plugin_config[plugin]

    def to_mapping(self, kind: ConfigKind = ConfigKind.KOORDINATOR) -> dict[str, object]:
        # Points are written with `disabled: ["*"]` so the file is self-contained:
        # loading it does not merge the defaults in again. A point with nothing
        # enabled and no defaults for `kind` is left out.
        out: dict[str, object] = {"name": self.name}
        if self.node_selector is not None:
            out["nodeSelector"] = selectors.EITHER.encode(self.node_selector)
        plugins: dict[str, object] = {}
        for point in ExtensionPoint:
            enabled = self.enabled(point)
            if enabled:
                plugins[point.value] = {
                    "enabled": [{"name": name} for name in enabled],
                    "disabled": [{"name": "*"}],
                }
            elif point in DEFAULT_PLUGINS[kind]:
                plugins[point.value] = {"disabled": [{"name": "*"}]}
        out["plugins"] = plugins
        out["pluginConfig"] = [
            {"name": name, "args": args.to_mapping()} for name, args in self.plugin_config.items()
        ]
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class DeschedulerConfiguration:
    """The whole configuration, fully defaulted. Build it with `load_config`."""

    kind: ConfigKind = ConfigKind.KOORDINATOR
    leader_election: LeaderElection = field(
        default_factory=LeaderElection,
        metadata=fields.spec("leaderElection", fields.Nested(LeaderElection)),
    )
    client_connection: ClientConnection = field(
        default_factory=ClientConnection,
        metadata=fields.spec("clientConnection", fields.Nested(ClientConnection)),
    )
    # Accepted so Koordinator files load; nodeqos has no pprof endpoint to enable,
    # hence off by default (Koordinator defaults both to true).
    enable_profiling: bool = field(
        default=False, metadata=fields.spec("enableProfiling", codecs.BOOL)
    )
    enable_contention_profiling: bool = field(
        default=False, metadata=fields.spec("enableContentionProfiling", codecs.BOOL)
    )
    healthz_bind_address: str = field(
        default=f"0.0.0.0:{DEFAULT_PORT}", metadata=fields.spec("healthzBindAddress", BindAddress())
    )
    metrics_bind_address: str = field(
        default=f"0.0.0.0:{DEFAULT_PORT}", metadata=fields.spec("metricsBindAddress", BindAddress())
    )
    # 0 runs one descheduling pass and exits (Koordinator and upstream alike).
    descheduling_interval: timedelta = field(
        default=timedelta(0), metadata=fields.spec("deschedulingInterval", codecs.DURATION)
    )
    dry_run: bool = field(default=False, metadata=fields.spec("dryRun", codecs.BOOL))
    node_selector: LabelSelector | None = field(
        default=None, metadata=fields.spec("nodeSelector", selectors.EITHER)
    )
    max_pods_to_evict_per_node: int | None = field(
        default=DEFAULT_MAX_PODS_TO_EVICT_PER_NODE,
        metadata=fields.spec("maxNoOfPodsToEvictPerNode", codecs.NON_NEGATIVE),
    )
    max_pods_to_evict_per_namespace: int | None = field(
        default=None, metadata=fields.spec("maxNoOfPodsToEvictPerNamespace", codecs.NON_NEGATIVE)
    )
    max_pods_to_evict_total: int | None = field(
        default=DEFAULT_MAX_PODS_TO_EVICT_TOTAL,
        metadata=fields.spec("maxNoOfPodsToEvictTotal", codecs.NON_NEGATIVE),
    )
    eviction_failure_event_notification: bool = field(
        default=False, metadata=fields.spec("evictionFailureEventNotification", codecs.BOOL)
    )
    metrics_collector: MetricsCollector | None = field(
        default=None, metadata=fields.spec("metricsCollector", fields.Nested(MetricsCollector))
    )
    metrics_providers: tuple[MetricsProvider, ...] = field(
        default=(),
        metadata=fields.spec("metricsProviders", codecs.ListOf(fields.Nested(MetricsProvider))),
    )
    grace_period_seconds: int | None = field(
        default=None, metadata=fields.spec("gracePeriodSeconds", codecs.NON_NEGATIVE)
    )
    profiles: tuple[Profile, ...] = ()

    def check(self, path: FieldPath, errors: Errors, failed: frozenset[str]) -> None:
        # Upstream's policy validation of metrics providers.
        if "metricsProviders" in failed:
            return
        seen: set[MetricsSource | None] = set()
        for position, provider in enumerate(self.metrics_providers):
            if provider.source in seen:
                errors.add(
                    path.child("metricsProviders").index(position).child("source"),
                    f"{provider.source} is configured more than once",
                )
            seen.add(provider.source)
        if (
            MetricsSource.KUBERNETES_METRICS in seen
            and self.metrics_collector
            and self.metrics_collector.enabled
        ):
            errors.add(
                path.child("metricsCollector").child("enabled"),
                "cannot be combined with a KubernetesMetrics metrics provider",
            )

    def profile(self, name: str) -> Profile:
        for profile in self.profiles:
            if profile.name == name:
                return profile
        raise KeyError(name)

    def to_mapping(self) -> dict[str, object]:
        """The configuration as YAML-ready data; loading it gives an equal object."""
        return {
            "apiVersion": fields.API_VERSION,
            "kind": self.kind.value,
            **fields.encode_object(self),
            "profiles": [profile.to_mapping(self.kind) for profile in self.profiles],
        }
