"""MigrationControllerArgs: Koordinator's evictor with migration limits and rate limiting.

Every field of Koordinator's `MigrationControllerArgs`
(`pkg/descheduler/apis/config/v1alpha2/types_pluginargs.go`) is accepted so
existing files load; defaults are its `SetDefaults_MigrationControllerArgs`,
checks its `ValidateMigrationControllerArgs` plus enum checks Koordinator only
hits at run time (evictionPolicy, objectLimiters keys).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import ClassVar, Self

from descheduler.config import codecs, common, fields, selectors
from descheduler.config.common import IncludeExclude, IntOrPercent, PriorityThreshold
from descheduler.config.selectors import LabelSelector
from kube.configstruct import Errors, FieldPath


class EvictionPolicy(enum.StrEnum):
    """How a pod is removed (Koordinator's evictor names)."""

    EVICTION = "Eviction"  # the Eviction API, PDB-aware
    DELETE = "Delete"
    SOFT_EVICTION = "SoftEviction"


class JobMode(enum.StrEnum):
    """PodMigrationJob modes (`scheduling.koordinator.sh/v1alpha1`)."""

    RESERVATION_FIRST = "ReservationFirst"
    EVICT_DIRECTLY = "EvictDirectly"


class EvictionGate(enum.StrEnum):
    """Checks `skipEvictionGates` may bypass."""

    MAX_UNAVAILABLE_PER_WORKLOAD = "MaxUnavailablePerWorkload"
    MAX_MIGRATING_PER_WORKLOAD = "MaxMigratingPerWorkload"
    MAX_MIGRATING_PER_NODE = "MaxMigratingPerNode"
    MAX_MIGRATING_PER_NAMESPACE = "MaxMigratingPerNamespace"
    MAX_MIGRATING_GLOBALLY = "MaxMigratingGlobally"
    EXPECTED_REPLICAS = "ExpectedReplicas"
    PVC = "PVC"
    BARE_PODS = "BarePods"
    LOCAL_STORAGE = "LocalStorage"
    SYSTEM_CRITICAL = "SystemCritical"
    PRIORITY_THRESHOLD = "PriorityThreshold"
    LABEL_SELECTOR = "LabelSelector"
    NAMESPACES = "Namespaces"
    NODE_FIT = "NodeFit"


class PropagationPolicy(enum.StrEnum):
    ORPHAN = "Orphan"
    BACKGROUND = "Background"
    FOREGROUND = "Foreground"


@dataclass(frozen=True, kw_only=True, slots=True)
class ObjectLimiter:
    """At most `max_migrating` migrations per object within `duration` (plus `burst`)."""

    duration: timedelta = field(
        default=timedelta(0), metadata=fields.spec("duration", codecs.DURATION)
    )
    # None or 0: derived from maxMigratingPerWorkload by the controller.
    max_migrating: IntOrPercent | None = field(
        default=None, metadata=fields.spec("maxMigrating", common.INT_OR_PERCENT)
    )
    burst: int = field(default=0, metadata=fields.spec("burst", codecs.NON_NEGATIVE))


# Schedulers that can place Reservations (ReservationFirst jobs).
DEFAULT_SCHEDULER_NAMES = ("koord-scheduler",)
# Koordinator's MigrationLimitObjectType values.
LIMITER_KINDS = ("workload", "namespace")


def _default_limiters() -> Mapping[str, ObjectLimiter]:
    # Koordinator: a workload limiter over 5 minutes; none for namespaces.
    return codecs.frozen_map({"workload": ObjectLimiter(duration=timedelta(minutes=5))})


@dataclass(frozen=True, kw_only=True, slots=True)
class Preconditions:
    uid: str | None = field(default=None, metadata=fields.spec("uid", codecs.STRING))
    resource_version: str | None = field(
        default=None, metadata=fields.spec("resourceVersion", codecs.STRING)
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class DeleteOptions:
    """metav1.DeleteOptions, for `defaultDeleteOptions`."""

    kind: str | None = field(default=None, metadata=fields.spec("kind", codecs.STRING))
    api_version: str | None = field(default=None, metadata=fields.spec("apiVersion", codecs.STRING))
    grace_period_seconds: int | None = field(
        default=None, metadata=fields.spec("gracePeriodSeconds", codecs.NON_NEGATIVE)
    )
    preconditions: Preconditions | None = field(
        default=None, metadata=fields.spec("preconditions", fields.Nested(Preconditions))
    )
    orphan_dependents: bool | None = field(
        default=None, metadata=fields.spec("orphanDependents", codecs.BOOL)
    )
    propagation_policy: PropagationPolicy | None = field(
        default=None, metadata=fields.spec("propagationPolicy", codecs.Choice(PropagationPolicy))
    )
    dry_run: tuple[str, ...] = field(
        default=(), metadata=fields.spec("dryRun", codecs.ListOf(codecs.KeyChoice(("All",))))
    )
    ignore_store_read_error_with_cluster_breaking_potential: bool | None = field(
        default=None,
        metadata=fields.spec("ignoreStoreReadErrorWithClusterBreakingPotential", codecs.BOOL),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class ArbitrationArgs:
    """The arbitration mechanism that orders PodMigrationJobs."""

    # Koordinator turns arbitration on when the block is absent but reads an
    # omitted `enabled` inside a given block as false; here it is on either way.
    enabled: bool = field(default=True, metadata=fields.spec("enabled", codecs.BOOL))
    interval: timedelta = field(
        default=timedelta(milliseconds=500), metadata=fields.spec("interval", codecs.DURATION)
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class MigrationControllerArgs(fields.PluginArgs):
    KIND: ClassVar[str] = "MigrationControllerArgs"

    dry_run: bool = field(default=False, metadata=fields.spec("dryRun", codecs.BOOL))
    max_concurrent_reconciles: int = field(
        default=1, metadata=fields.spec("maxConcurrentReconciles", codecs.POSITIVE)
    )
    evict_failed_bare_pods: bool = field(
        default=False, metadata=fields.spec("evictFailedBarePods", codecs.BOOL)
    )
    evict_all_bare_pods: bool = field(
        default=False, metadata=fields.spec("evictAllBarePods", codecs.BOOL)
    )
    evict_local_storage_pods: bool = field(
        default=False, metadata=fields.spec("evictLocalStoragePods", codecs.BOOL)
    )
    evict_system_critical_pods: bool = field(
        default=False, metadata=fields.spec("evictSystemCriticalPods", codecs.BOOL)
    )
    ignore_pvc_pods: bool = field(default=False, metadata=fields.spec("ignorePvcPods", codecs.BOOL))
    priority_threshold: PriorityThreshold | None = field(
        default=None, metadata=fields.spec("priorityThreshold", common.PRIORITY_THRESHOLD)
    )
    label_selector: LabelSelector | None = field(
        default=None, metadata=fields.spec("labelSelector", selectors.MAPPING)
    )
    namespaces: IncludeExclude | None = field(
        default=None, metadata=fields.spec("namespaces", common.NAMESPACES)
    )
    node_fit: bool = field(default=False, metadata=fields.spec("nodeFit", codecs.BOOL))
    node_selector: LabelSelector | None = field(
        default=None, metadata=fields.spec("nodeSelector", selectors.STRING)
    )
    skip_eviction_gates: tuple[EvictionGate, ...] = field(
        default=(),
        metadata=fields.spec("skipEvictionGates", codecs.ListOf(codecs.Choice(EvictionGate))),
    )
    max_migrating_globally: int | None = field(
        default=None, metadata=fields.spec("maxMigratingGlobally", codecs.NON_NEGATIVE)
    )
    max_migrating_per_node: int = field(
        default=2, metadata=fields.spec("maxMigratingPerNode", codecs.NON_NEGATIVE)
    )
    max_migrating_per_namespace: int | None = field(
        default=None, metadata=fields.spec("maxMigratingPerNamespace", codecs.NON_NEGATIVE)
    )
    max_migrating_per_workload: IntOrPercent | None = field(
        default=None, metadata=fields.spec("maxMigratingPerWorkload", common.INT_OR_PERCENT)
    )
    max_unavailable_per_workload: IntOrPercent | None = field(
        default=None, metadata=fields.spec("maxUnavailablePerWorkload", common.INT_OR_PERCENT)
    )
    skip_check_expected_replicas: bool = field(
        default=False, metadata=fields.spec("skipCheckExpectedReplicas", codecs.BOOL)
    )
    object_limiters: Mapping[str, ObjectLimiter] = field(
        default_factory=_default_limiters,
        metadata=fields.spec(
            "objectLimiters",
            codecs.MapOf(fields.Nested(ObjectLimiter), key=codecs.KeyChoice(LIMITER_KINDS)),
        ),
    )
    # Koordinator defaults to ReservationFirst, which needs koord-scheduler and
    # Reservation objects that nodeqos does not have; EvictDirectly is the mode
    # that works here, so a Koordinator file without this key still starts.
    # Selecting ReservationFirst explicitly fails at start-up, saying why.
    default_job_mode: JobMode = field(
        default=JobMode.EVICT_DIRECTLY,
        metadata=fields.spec("defaultJobMode", codecs.Choice(JobMode)),
    )
    default_job_ttl: timedelta = field(
        default=timedelta(minutes=5), metadata=fields.spec("defaultJobTTL", codecs.DURATION)
    )
    # Koordinator also substitutes the default for an empty list.
    scheduler_names: tuple[str, ...] = field(
        default=DEFAULT_SCHEDULER_NAMES,
        metadata=fields.spec("schedulerNames", codecs.ListOf(codecs.NAME)),
    )
    evict_qps: float = field(
        default=10.0,
        metadata=fields.spec("evictQPS", codecs.NumberOrNumericString(codecs.Number(above=0))),
    )
    evict_burst: int = field(default=1, metadata=fields.spec("evictBurst", codecs.POSITIVE))
    eviction_policy: EvictionPolicy = field(
        default=EvictionPolicy.EVICTION,
        metadata=fields.spec("evictionPolicy", codecs.Choice(EvictionPolicy)),
    )
    default_delete_options: DeleteOptions | None = field(
        default=None, metadata=fields.spec("defaultDeleteOptions", fields.Nested(DeleteOptions))
    )
    arbitration_args: ArbitrationArgs = field(
        default_factory=ArbitrationArgs,
        metadata=fields.spec("arbitrationArgs", fields.Nested(ArbitrationArgs)),
    )

    def complete(self, raw: Mapping[str, object], path: FieldPath, errors: Errors) -> Self:
        # Koordinator's defaulting treats an empty list or map like an absent one.
        args = self
        if not args.scheduler_names:
            args = dataclasses.replace(args, scheduler_names=DEFAULT_SCHEDULER_NAMES)
        if not args.object_limiters:
            args = dataclasses.replace(args, object_limiters=_default_limiters())
        return args
