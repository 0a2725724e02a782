"""LowNodeLoadArgs: thresholds on measured node load (NodeMetric), per node pool.

Fields and defaults are Koordinator's `LowNodeLoadArgs`
(`pkg/descheduler/apis/config/v1alpha2/types_loadaware.go`, `defaults.go`,
`validation/validation_loadaware.go`). Where Koordinator quietly repairs a file,
this rejects it with the field path instead:

- a resource named in only one of lowThresholds/highThresholds (Koordinator
  fills the other side with 100%, moving that mark) is an error;
- a resource weight <= 0 (Koordinator resets it to 1) is an error;
- `consecutiveAbnormalities: 0` (Koordinator reads it as "unset", i.e. 5) is an
  error: write 1 to act on the first abnormal reading.

Defaulting that depends on other fields happens in `complete`: every resource
named in a threshold gets weight 1 unless weighted, and each node pool inherits
every field it leaves out (thresholds, weights, and each anomalyCondition field
on its own) from the top level, as `SetDefaults_LowNodeLoadNodePools` does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import ClassVar, Self

from descheduler.config import codecs, common, fields, selectors
from descheduler.config.common import IncludeExclude
from descheduler.config.selectors import LabelSelector
from kube.configstruct import Errors, FieldPath

DEFAULT_POOL_NAME = "__default_node_pool__"  # Koordinator's name for the top-level pool
_DEFAULT_WEIGHTS = ("cpu", "memory")


def _default_weights() -> Mapping[str, int]:
    return codecs.frozen_map(dict.fromkeys(_DEFAULT_WEIGHTS, 1))


@dataclass(frozen=True, kw_only=True, slots=True)
class AnomalyCondition:
    """How many consecutive readings above the high mark make a node a source.

    A count of 0 means "not set", as Koordinator v1.8 defaults it: the default
    at the top level, the top level's value in a node pool (`Args.complete`).
    """

    timeout: timedelta = field(
        default=timedelta(minutes=1), metadata=fields.spec("timeout", codecs.DURATION)
    )
    consecutive_abnormalities: int = field(
        default=5, metadata=fields.spec("consecutiveAbnormalities", codecs.NON_NEGATIVE)
    )
    consecutive_normalities: int = field(
        default=3, metadata=fields.spec("consecutiveNormalities", codecs.NON_NEGATIVE)
    )

    def or_else(self, other: AnomalyCondition) -> AnomalyCondition:
        """Each count left at 0 taken from `other`."""
        return AnomalyCondition(
            timeout=self.timeout,
            consecutive_abnormalities=self.consecutive_abnormalities
            or other.consecutive_abnormalities,
            consecutive_normalities=self.consecutive_normalities or other.consecutive_normalities,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class PodSelector:
    name: str = field(default="", metadata=fields.spec("name", codecs.STRING))
    selector: LabelSelector | None = field(
        default=None, metadata=fields.spec("selector", selectors.MAPPING)
    )


_THRESHOLD_KEYS = ("highThresholds", "lowThresholds", "prodHighThresholds", "prodLowThresholds")


@dataclass(frozen=True, kw_only=True, slots=True)
class Marks:
    """The marks a node pool balances by: the top level's and each of `nodePools`' fields."""

    use_deviation_thresholds: bool = field(
        default=False, metadata=fields.spec("useDeviationThresholds", codecs.BOOL)
    )
    high_thresholds: Mapping[str, float] = field(
        default_factory=common.no_thresholds,
        metadata=fields.spec("highThresholds", common.THRESHOLDS),
    )
    low_thresholds: Mapping[str, float] = field(
        default_factory=common.no_thresholds,
        metadata=fields.spec("lowThresholds", common.THRESHOLDS),
    )
    prod_high_thresholds: Mapping[str, float] = field(
        default_factory=common.no_thresholds,
        metadata=fields.spec("prodHighThresholds", common.THRESHOLDS),
    )
    prod_low_thresholds: Mapping[str, float] = field(
        default_factory=common.no_thresholds,
        metadata=fields.spec("prodLowThresholds", common.THRESHOLDS),
    )
    resource_weights: Mapping[str, int] = field(
        default_factory=_default_weights,
        metadata=fields.spec("resourceWeights", common.RESOURCE_WEIGHTS),
    )
    anomaly_condition: AnomalyCondition = field(
        default_factory=AnomalyCondition,
        metadata=fields.spec("anomalyCondition", fields.Nested(AnomalyCondition)),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class NodePool(Marks):
    """One group of nodes with its own marks. After loading, inherited values are filled in."""

    name: str = field(default="", metadata=fields.spec("name", codecs.STRING))
    node_selector: LabelSelector | None = field(
        default=None, metadata=fields.spec("nodeSelector", selectors.MAPPING)
    )


def _check_levels(
    errors: Errors,
    path: FieldPath,
    pool: NodePool,
    *,
    judged: frozenset[str],
    broken: frozenset[str] = frozenset(),
) -> None:
    """Threshold rules for one pool.

    A rule is checked when it involves a key in `judged` (written there, not
    inherited) and none in `broken` (failed to decode, so holding a stand-in).
    """

    def applies(*keys: str) -> bool:
        return bool(judged.intersection(keys)) and not broken.intersection(keys)

    pairs = (
        ("lowThresholds", pool.low_thresholds, "highThresholds", pool.high_thresholds),
        (
            "prodLowThresholds",
            pool.prod_low_thresholds,
            "prodHighThresholds",
            pool.prod_high_thresholds,
        ),
    )
    for low_key, low, high_key, high in pairs:
        if applies(low_key, high_key):
            common.check_threshold_pair(errors, path, low_key, low, high_key, high)
    # Koordinator: the prod high mark cannot sit above the node high mark.
    if applies("prodHighThresholds", "highThresholds"):
        for resource, value in pool.prod_high_thresholds.items():
            limit = pool.high_thresholds.get(resource)
            if limit is not None and value > limit:
                errors.add(
                    path.child("prodHighThresholds").key(resource),
                    f"must not exceed highThresholds.{resource} ({codecs.NUMBER.encode(limit)})",
                )


def _weights(given: Mapping[str, int], *threshold_maps: Mapping[str, float]) -> Mapping[str, int]:
    """cpu and memory, and every resource with a threshold, weigh 1 unless weighted in `given`."""
    weights = dict.fromkeys(_DEFAULT_WEIGHTS, 1)
    for thresholds in threshold_maps:
        weights.update(dict.fromkeys(thresholds, 1))
    weights.update(given)
    return codecs.frozen_map(weights)


def _given(raw: object) -> frozenset[str]:
    """The keys a YAML mapping sets to something other than null."""
    if not isinstance(raw, Mapping):
        return frozenset()
    return frozenset(str(key) for key, value in raw.items() if value is not None)


@dataclass(frozen=True, kw_only=True, slots=True)
class LowNodeLoadArgs(fields.PluginArgs, Marks):
    KIND: ClassVar[str] = "LowNodeLoadArgs"

    paused: bool = field(default=False, metadata=fields.spec("paused", codecs.BOOL))
    dry_run: bool = field(default=False, metadata=fields.spec("dryRun", codecs.BOOL))
    number_of_nodes: int = field(
        default=0, metadata=fields.spec("numberOfNodes", codecs.NON_NEGATIVE)
    )
    node_metric_expiration_seconds: int = field(
        default=180, metadata=fields.spec("nodeMetricExpirationSeconds", codecs.POSITIVE)
    )
    evictable_namespaces: IncludeExclude | None = field(
        default=None, metadata=fields.spec("evictableNamespaces", common.NAMESPACES)
    )
    node_selector: LabelSelector | None = field(
        default=None, metadata=fields.spec("nodeSelector", selectors.MAPPING)
    )
    pod_selectors: tuple[PodSelector, ...] = field(
        default=(), metadata=fields.spec("podSelectors", codecs.ListOf(fields.Nested(PodSelector)))
    )
    node_fit: bool = field(default=True, metadata=fields.spec("nodeFit", codecs.BOOL))
    detector_cache_timeout: timedelta = field(
        default=timedelta(minutes=5), metadata=fields.spec("detectorCacheTimeout", codecs.DURATION)
    )
    node_pools: tuple[NodePool, ...] = field(
        default=(), metadata=fields.spec("nodePools", codecs.ListOf(fields.Nested(NodePool)))
    )

    def check(self, path: FieldPath, errors: Errors, failed: frozenset[str]) -> None:
        _check_levels(
            errors, path, self.default_pool(), judged=frozenset(_THRESHOLD_KEYS), broken=failed
        )

    def default_pool(self) -> NodePool:
        """The pool formed by the top-level fields."""
        marks = {f.name: getattr(self, f.name) for f in dataclasses.fields(Marks)}
        return NodePool(name=DEFAULT_POOL_NAME, node_selector=self.node_selector, **marks)

    @property
    def pools(self) -> tuple[NodePool, ...]:
        """The pools to balance: `nodePools`, or the top-level pool when there are none.

        Koordinator always runs the top-level pool first and then `nodePools` on
        the nodes it did not act on; the plugin decides whether to copy that.
        """
        return self.node_pools or (self.default_pool(),)

    def complete(self, raw: Mapping[str, object], path: FieldPath, errors: Errors) -> Self:
        top = dataclasses.replace(
            self,
            resource_weights=_weights(
                self.resource_weights, self.low_thresholds, self.high_thresholds
            ),
            anomaly_condition=self.anomaly_condition.or_else(AnomalyCondition()),
        )
        raw_pools = raw.get("nodePools")
        pools = tuple(
            top._inherit(pool, raw_pool, path.child("nodePools").index(position), errors)
            for position, (pool, raw_pool) in enumerate(
                zip(self.node_pools, raw_pools if isinstance(raw_pools, list) else [], strict=False)
            )
        )
        return dataclasses.replace(top, node_pools=pools)

    def _inherit(
        self, pool: NodePool, raw_pool: object, path: FieldPath, errors: Errors
    ) -> NodePool:
        given = _given(raw_pool)
        raw_anomaly = raw_pool.get("anomalyCondition") if isinstance(raw_pool, Mapping) else None
        anomaly_given = _given(raw_anomaly)
        own, top = pool.anomaly_condition, self.anomaly_condition
        anomaly = AnomalyCondition(
            timeout=own.timeout if "timeout" in anomaly_given else top.timeout,
            consecutive_abnormalities=(
                own.consecutive_abnormalities
                if "consecutiveAbnormalities" in anomaly_given
                else top.consecutive_abnormalities
            ),
            consecutive_normalities=(
                own.consecutive_normalities
                if "consecutiveNormalities" in anomaly_given
                else top.consecutive_normalities
            ),
        ).or_else(top)

        def pick(
            key: str, own: Mapping[str, float], inherited: Mapping[str, float]
        ) -> Mapping[str, float]:
            return own if key in given else inherited

        low = pick("lowThresholds", pool.low_thresholds, self.low_thresholds)
        high = pick("highThresholds", pool.high_thresholds, self.high_thresholds)
        base_weights = (
            pool.resource_weights if "resourceWeights" in given else self.resource_weights
        )
        resolved = dataclasses.replace(
            pool,
            high_thresholds=high,
            low_thresholds=low,
            prod_high_thresholds=pick(
                "prodHighThresholds", pool.prod_high_thresholds, self.prod_high_thresholds
            ),
            prod_low_thresholds=pick(
                "prodLowThresholds", pool.prod_low_thresholds, self.prod_low_thresholds
            ),
            resource_weights=_weights(base_weights, low, high),
            anomaly_condition=anomaly,
        )
        _check_levels(errors, path, resolved, judged=given)
        return resolved
