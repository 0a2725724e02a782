"""The NodeSLO model (slo.koordinator.sh/v1alpha1): typed spec, defaults, merge.

The agent's states informer reads its node's NodeSLO and calls
`merge_over_defaults(obj["spec"])`; the QoS plugins read the merged
`NodeSLOSpec`. Field names, ranges and defaults are Koordinator's
(`apis/slo/v1alpha1/nodeslo_types.go`, `pkg/util/sloconfig`):

- merging is Koordinator's: a field set in the object replaces the default,
  nested objects merge field by field, lists replace (`kube.configstruct.merge`);
- `memoryEvictLowerPercent` left unset becomes `memoryEvictThresholdPercent - 2`
  after the merge (and `cpuEvictLowerPercent` likewise when a CPU evict
  threshold is set), so a user who only raises the threshold moves both;
- `cpuEvictBEUsageThresholdPercent` defaults to 90, koordlet's built-in value.

`blkioQOS`, `networkQOS`, `extensions` and `hostApplications` are kept as opaque
JSON (nodeqos does not act on them) but round-trip exactly.

Errors never stop a merge: a field with a wrong type, an out-of-range value or
an unknown enum value is reported and keeps its default, and a lower bound not
below its upper bound is reported and re-derived, so the agent always has a
usable spec. Paths read like
``spec.resourceUsedThresholdWithBE.cpuSuppressThresholdPercent: must be within [0, 100]``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kube import configcodecs as codecs
from kube import configstruct, slo

__all__ = [
    "CPUBurstStrategy",
    "CPUQOSCfg",
    "MemoryQOSCfg",
    "NodeSLO",
    "NodeSLOSpec",
    "ResctrlQOSCfg",
    "ResourceQOS",
    "ResourceQOSPolicies",
    "ResourceQOSStrategy",
    "ResourceThresholdStrategy",
    "SystemStrategy",
    "merge_over_defaults",
    "parse_spec",
]


def _opt(wire: str, codec: configstruct.Codec[Any]) -> Any:
    """An optional field, unset (None) by default."""
    return field(default=None, metadata=configstruct.spec(wire, codec))


def _int(wire: str, lo: int | None = None, hi: int | None = None) -> Any:
    return _opt(wire, codecs.Integer(minimum=lo, maximum=hi))


def _pct(wire: str) -> Any:
    return _int(wire, 0, 100)


def _nested(wire: str, cls: type[Any]) -> dict[str, object]:
    return configstruct.spec(wire, configstruct.Nested(cls, partial=True))


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceThresholdStrategy:
    """`resourceUsedThresholdWithBE`: BE suppression and eviction thresholds."""

    enable: bool | None = _opt("enable", codecs.BOOL)
    cpu_suppress_threshold_percent: int | None = _pct("cpuSuppressThresholdPercent")
    cpu_suppress_min_percent: int | None = _pct("cpuSuppressMinPercent")
    cpu_suppress_policy: str | None = _opt(
        "cpuSuppressPolicy", codecs.KeyChoice(("cpuset", "cfsQuota"))
    )
    memory_evict_threshold_percent: int | None = _pct("memoryEvictThresholdPercent")
    memory_evict_lower_percent: int | None = _pct("memoryEvictLowerPercent")
    memory_allocatable_evict_threshold_percent: int | None = _int(
        "memoryAllocatableEvictThresholdPercent", 0
    )
    memory_allocatable_evict_lower_percent: int | None = _int(
        "memoryAllocatableEvictLowerPercent", 0
    )
    cpu_evict_be_satisfaction_upper_percent: int | None = _pct("cpuEvictBESatisfactionUpperPercent")
    cpu_evict_be_satisfaction_lower_percent: int | None = _pct("cpuEvictBESatisfactionLowerPercent")
    cpu_evict_be_usage_threshold_percent: int | None = _pct("cpuEvictBEUsageThresholdPercent")
    cpu_evict_time_window_seconds: int | None = _int("cpuEvictTimeWindowSeconds", 1)
    cpu_evict_threshold_percent: int | None = _pct("cpuEvictThresholdPercent")
    cpu_evict_lower_percent: int | None = _pct("cpuEvictLowerPercent")
    cpu_allocatable_evict_threshold_percent: int | None = _int(
        "cpuAllocatableEvictThresholdPercent", 0
    )
    cpu_allocatable_evict_lower_percent: int | None = _int("cpuAllocatableEvictLowerPercent", 0)
    cpu_evict_policy: str | None = _opt(
        "cpuEvictPolicy", codecs.KeyChoice(("evictByRealLimit", "evictByAllocatable"))
    )
    evict_enabled_priority_threshold: int | None = _int("evictEnabledPriorityThreshold")
    allocatable_evict_priority_threshold: int | None = _int(
        "allocatableEvictPriorityThreshold", 0, 7999
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CPUQOSCfg:
    """`cpuQOS` of a QoS class."""

    enable: bool | None = _opt("enable", codecs.BOOL)
    group_identity: int | None = _int("groupIdentity", -1, 2)
    sched_idle: int | None = _int("schedIdle", 0, 1)
    core_expeller: bool | None = _opt("coreExpeller", codecs.BOOL)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryQOSCfg:
    """`memoryQOS` of a QoS class (memcg protection, throttling, async reclaim)."""

    enable: bool | None = _opt("enable", codecs.BOOL)
    min_limit_percent: int | None = _pct("minLimitPercent")
    low_limit_percent: int | None = _pct("lowLimitPercent")
    throttling_percent: int | None = _pct("throttlingPercent")
    wmark_ratio: int | None = _pct("wmarkRatio")
    wmark_scale_permill: int | None = _int("wmarkScalePermill", 1, 1000)
    wmark_min_adj: int | None = _int("wmarkMinAdj", -25, 50)
    priority_enable: int | None = _int("priorityEnable", 0, 1)
    priority: int | None = _int("priority", 0, 12)
    oom_kill_group: int | None = _int("oomKillGroup", 0, 1)
    page_cache_enable: bool | None = _opt("pageCacheEnable", codecs.BOOL)
    page_cache_limit_percent: int | None = _pct("pageCacheLimitPercent")
    page_cache_limit_size: int | None = _int("pageCacheLimitSize")
    page_cache_reclaim_sync: bool | None = _opt("pageCacheReclaimSync", codecs.BOOL)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResctrlQOSCfg:
    """`resctrlQOS` of a QoS class (LLC and memory bandwidth)."""

    enable: bool | None = _opt("enable", codecs.BOOL)
    cat_range_start_percent: int | None = _pct("catRangeStartPercent")
    cat_range_end_percent: int | None = _pct("catRangeEndPercent")
    mba_percent: int | None = _pct("mbaPercent")


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceQOS:
    """The QoS knobs of one class; blkio and network stay opaque JSON."""

    cpu_qos: CPUQOSCfg | None = field(default=None, metadata=_nested("cpuQOS", CPUQOSCfg))
    memory_qos: MemoryQOSCfg | None = field(
        default=None, metadata=_nested("memoryQOS", MemoryQOSCfg)
    )
    blkio_qos: Mapping[str, Any] | None = _opt("blkioQOS", codecs.JSON)
    resctrl_qos: ResctrlQOSCfg | None = field(
        default=None, metadata=_nested("resctrlQOS", ResctrlQOSCfg)
    )
    network_qos: Mapping[str, Any] | None = _opt("networkQOS", codecs.JSON)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceQOSPolicies:
    """`resourceQOSStrategy.policies`."""

    cpu_policy: str | None = _opt("cpuPolicy", codecs.KeyChoice(("groupIdentity", "coreSched")))
    net_qos_policy: str | None = _opt("netQOSPolicy", codecs.KeyChoice(("tc", "terway-qos")))


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceQOSStrategy:
    """`resourceQOSStrategy`: per-class QoS knobs."""

    policies: ResourceQOSPolicies | None = field(
        default=None, metadata=_nested("policies", ResourceQOSPolicies)
    )
    lsr_class: ResourceQOS | None = field(default=None, metadata=_nested("lsrClass", ResourceQOS))
    ls_class: ResourceQOS | None = field(default=None, metadata=_nested("lsClass", ResourceQOS))
    be_class: ResourceQOS | None = field(default=None, metadata=_nested("beClass", ResourceQOS))
    system_class: ResourceQOS | None = field(
        default=None, metadata=_nested("systemClass", ResourceQOS)
    )
    cgroup_root: ResourceQOS | None = field(
        default=None, metadata=_nested("cgroupRoot", ResourceQOS)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CPUBurstStrategy:
    """`cpuBurstStrategy`."""

    policy: str | None = _opt(
        "policy", codecs.KeyChoice(("none", "cpuBurstOnly", "cfsQuotaBurstOnly", "auto"))
    )
    cpu_burst_percent: int | None = _int("cpuBurstPercent", 1, 10000)
    cfs_quota_burst_percent: int | None = _int("cfsQuotaBurstPercent", 100)
    cfs_quota_burst_period_seconds: int | None = _int("cfsQuotaBurstPeriodSeconds", -1)
    share_pool_threshold_percent: int | None = _pct("sharePoolThresholdPercent")


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemStrategy:
    """`systemStrategy`: node-wide kernel knobs."""

    min_free_kbytes_factor: int | None = _int("minFreeKbytesFactor", 1)
    watermark_scale_factor: int | None = _int("watermarkScaleFactor", 1, 400)
    memcg_reap_back_ground: int | None = _int("memcgReapBackGround", 0, 1)
    sched_group_identity_enabled: int | None = _int("schedGroupIdentityEnabled")
    sched_idle_saver_wmark: int | None = _int("schedIdleSaverWmark")
    sched_features: Mapping[str, Any] | None = _opt("schedFeatures", codecs.JSON)
    page_cache_limit_enabled: int | None = _int("pageCacheLimitEnabled", 0, 1)
    total_network_bandwidth: str | int | None = _opt("totalNetworkBandwidth", codecs.QUANTITY)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSLOSpec:
    """`spec` of a NodeSLO. Use `defaults()` or `merge_over_defaults()` to get a full one."""

    resource_used_threshold_with_be: ResourceThresholdStrategy | None = field(
        default=None, metadata=_nested("resourceUsedThresholdWithBE", ResourceThresholdStrategy)
    )
    resource_qos_strategy: ResourceQOSStrategy | None = field(
        default=None, metadata=_nested("resourceQOSStrategy", ResourceQOSStrategy)
    )
    cpu_burst_strategy: CPUBurstStrategy | None = field(
        default=None, metadata=_nested("cpuBurstStrategy", CPUBurstStrategy)
    )
    system_strategy: SystemStrategy | None = field(
        default=None, metadata=_nested("systemStrategy", SystemStrategy)
    )
    extensions: Mapping[str, Any] | None = _opt("extensions", codecs.JSON)
    host_applications: Sequence[Any] | None = _opt("hostApplications", codecs.JSON_LIST)

    @classmethod
    def defaults(cls) -> NodeSLOSpec:
        """Koordinator's built-in NodeSLO spec (every QoS feature off)."""
        return _DEFAULTS

    def to_api(self) -> dict[str, Any]:
        """The wire form (unset fields omitted)."""
        return configstruct.encode_object(self)

    @property
    def thresholds(self) -> ResourceThresholdStrategy:
        """`resourceUsedThresholdWithBE`, or an all-unset one."""
        return self.resource_used_threshold_with_be or ResourceThresholdStrategy()


def parse_spec(raw: Mapping[str, Any] | None, path: str = "spec") -> tuple[NodeSLOSpec, list[str]]:
    """Decode a NodeSLO `spec` as written (no defaults), with every error found."""
    errors = configstruct.Errors()
    found = configstruct.decode_partial(
        NodeSLOSpec, raw or {}, configstruct.FieldPath(path), errors
    )
    return found, [str(error) for error in errors]


_ORDERED_PAIRS = (  # (lower, upper) wire names in ResourceThresholdStrategy
    ("memoryEvictLowerPercent", "memoryEvictThresholdPercent"),
    ("cpuEvictLowerPercent", "cpuEvictThresholdPercent"),
    ("cpuEvictBESatisfactionLowerPercent", "cpuEvictBESatisfactionUpperPercent"),
    ("memoryAllocatableEvictLowerPercent", "memoryAllocatableEvictThresholdPercent"),
    ("cpuAllocatableEvictLowerPercent", "cpuAllocatableEvictThresholdPercent"),
)


def _finish_thresholds(
    t: ResourceThresholdStrategy, path: str, errors: list[str]
) -> ResourceThresholdStrategy:
    """Drop a lower bound not below its upper bound, then derive unset lower bounds."""
    names = {f.metadata["yaml_key"]: f.name for f in dataclasses.fields(t)}
    for lower, upper in _ORDERED_PAIRS:
        low, high = getattr(t, names[lower]), getattr(t, names[upper])
        if low is not None and high is not None and low >= high:
            errors.append(f"{path}.{lower}: must be less than {upper} ({high})")
            t = dataclasses.replace(t, **{names[lower]: None})
    if t.memory_evict_lower_percent is None and t.memory_evict_threshold_percent is not None:
        t = dataclasses.replace(t, memory_evict_lower_percent=t.memory_evict_threshold_percent - 2)
    if t.cpu_evict_lower_percent is None and t.cpu_evict_threshold_percent is not None:
        t = dataclasses.replace(t, cpu_evict_lower_percent=t.cpu_evict_threshold_percent - 2)
    return t


def _check_cat_ranges(strategy: ResourceQOSStrategy, errors: list[str]) -> None:
    for f in dataclasses.fields(strategy):
        rc = getattr(getattr(strategy, f.name), "resctrl_qos", None)
        start = getattr(rc, "cat_range_start_percent", None)
        end = getattr(rc, "cat_range_end_percent", None)
        if start is not None and end is not None and start >= end:
            errors.append(
                f"spec.resourceQOSStrategy.{f.metadata['yaml_key']}.resctrlQOS.catRangeStartPercent:"
                f" must be less than catRangeEndPercent ({end})"
            )


def merge_over_defaults(raw_spec: Mapping[str, Any] | None) -> tuple[NodeSLOSpec, list[str]]:
    """The spec the agent runs with: `raw_spec` merged over `NodeSLOSpec.defaults()`.

    Returns the merged spec and every error (the spec is usable either way).
    """
    parsed, errors = parse_spec(raw_spec)
    merged = configstruct.merge(_DEFAULTS, parsed)
    _check_cat_ranges(merged.resource_qos_strategy or ResourceQOSStrategy(), errors)
    thresholds = _finish_thresholds(merged.thresholds, "spec.resourceUsedThresholdWithBE", errors)
    return dataclasses.replace(merged, resource_used_threshold_with_be=thresholds), errors


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSLO:
    """A NodeSLO object, named after its node; `spec` is as written (not merged)."""

    metadata: slo.ObjectMeta
    spec: NodeSLOSpec = NodeSLOSpec()

    @classmethod
    def from_api(cls, obj: Mapping[str, Any]) -> NodeSLO:
        """Parse a whole NodeSLO; raises `ValueError` listing every invalid field."""
        spec, errors = parse_spec(obj.get("spec"))
        if errors:
            raise ValueError("invalid NodeSLO: " + "; ".join(errors))
        return cls(metadata=slo.ObjectMeta.from_api(obj.get("metadata")), spec=spec)

    def to_api(self) -> dict[str, Any]:
        """The whole object."""
        return {
            "apiVersion": slo.API_VERSION,
            "kind": "NodeSLO",
            "metadata": self.metadata.to_api(),
            "spec": self.spec.to_api(),
        }


# Koordinator's DefaultNodeSLOSpecConfig in wire form. Every QoS feature is off;
# the per-class values are what a user gets by only flipping `enable`.


def _qos_class(identity: int, wmark: tuple[int, int, int], cat_end: int) -> dict[str, Any]:
    ratio, permill, min_adj = wmark
    zero = dict.fromkeys(("minLimitPercent", "lowLimitPercent", "throttlingPercent"), 0)
    oom = dict.fromkeys(("priorityEnable", "priority", "oomKillGroup"), 0)
    net = dict.fromkeys(("ingressRequest", "ingressLimit", "egressRequest", "egressLimit"), 0)
    cpu = {"groupIdentity": identity, "schedIdle": 0, "coreExpeller": identity == 2}
    mem = {"wmarkRatio": ratio, "wmarkScalePermill": permill, "wmarkMinAdj": min_adj}
    cat = {"catRangeStartPercent": 0, "catRangeEndPercent": cat_end, "mbaPercent": 100}
    return {
        "cpuQOS": {"enable": False, **cpu},
        "memoryQOS": {"enable": False, **zero, **mem, **oom},
        "resctrlQOS": {"enable": False, **cat},
        "blkioQOS": {"enable": False},
        "networkQOS": {"enable": False, **net},
    }


_DEFAULT_SPEC: dict[str, Any] = {
    "resourceUsedThresholdWithBE": {
        "enable": False,
        "cpuSuppressThresholdPercent": 65,
        "cpuSuppressPolicy": "cpuset",
        "memoryEvictThresholdPercent": 70,
        "cpuEvictBEUsageThresholdPercent": 90,
        "cpuEvictPolicy": "evictByRealLimit",
    },
    "resourceQOSStrategy": {
        "policies": {"cpuPolicy": "groupIdentity", "netQOSPolicy": "tc"},
        "lsrClass": _qos_class(2, (95, 20, -25), 100),
        "lsClass": _qos_class(2, (95, 20, -25), 100),
        "beClass": _qos_class(-1, (95, 20, 50), 30),
        "systemClass": _qos_class(0, (0, 50, 0), 100),
        "cgroupRoot": {"blkioQOS": {"enable": False}},
    },
    "cpuBurstStrategy": {
        "policy": "none",
        "cpuBurstPercent": 1000,
        "cfsQuotaBurstPercent": 300,
        "cfsQuotaBurstPeriodSeconds": -1,
        "sharePoolThresholdPercent": 50,
    },
    "systemStrategy": {"totalNetworkBandwidth": "0"},
}
_DEFAULTS, _errors = parse_spec(_DEFAULT_SPEC)
if _errors:  # the table above is ours: a typo must fail loudly at import
    raise AssertionError(f"bad NodeSLO defaults: {_errors}")
