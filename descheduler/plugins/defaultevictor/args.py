"""DefaultEvictorArgs: which pods the DefaultEvictor lets other plugins evict.

Fields, defaults and checks follow kubernetes-sigs/descheduler
`pkg/framework/plugins/defaultevictor/{types,validation}.go`, except `nodeFit`:
upstream defaults it to false, nodeqos to true (docs/design.md, "Beyond the
reference" 4, safe defaults: a pod that fits no other node is not evicted
unless the user says so).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import timedelta
from typing import ClassVar

from descheduler.config import codecs, common, fields, selectors
from descheduler.config.common import PriorityThreshold
from descheduler.config.selectors import LabelSelector
from kube.configstruct import Errors, FieldPath


class NoEvictionPolicy(enum.StrEnum):
    """How the `descheduler.alpha.kubernetes.io/prefer-no-eviction` annotation is taken."""

    PREFERRED = "Preferred"
    MANDATORY = "Mandatory"


class PodProtection(enum.StrEnum):
    POD_WITH_LOCAL_STORAGE = "PodsWithLocalStorage"
    DAEMON_SET_PODS = "DaemonSetPods"
    SYSTEM_CRITICAL_PODS = "SystemCriticalPods"
    FAILED_BARE_PODS = "FailedBarePods"
    PODS_WITH_PVC = "PodsWithPVC"
    PODS_WITHOUT_PDB = "PodsWithoutPDB"
    PODS_WITH_RESOURCE_CLAIMS = "PodsWithResourceClaims"


# Protections that are on unless disabled, and those a user may switch on.
DEFAULT_PROTECTIONS = (
    PodProtection.POD_WITH_LOCAL_STORAGE,
    PodProtection.SYSTEM_CRITICAL_PODS,
    PodProtection.FAILED_BARE_PODS,
    PodProtection.DAEMON_SET_PODS,
)
EXTRA_PROTECTIONS = (
    PodProtection.PODS_WITH_PVC,
    PodProtection.PODS_WITHOUT_PDB,
    PodProtection.PODS_WITH_RESOURCE_CLAIMS,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class ProtectedStorageClass:
    name: str = field(default="", metadata=fields.spec("name", codecs.STRING))


@dataclass(frozen=True, kw_only=True, slots=True)
class PodsWithPVCConfig:
    protected_storage_classes: tuple[ProtectedStorageClass, ...] = field(
        default=(),
        metadata=fields.spec(
            "protectedStorageClasses", codecs.ListOf(fields.Nested(ProtectedStorageClass))
        ),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class PodProtectionsConfig:
    pods_with_pvc: PodsWithPVCConfig | None = field(
        default=None, metadata=fields.spec("PodsWithPVC", fields.Nested(PodsWithPVCConfig))
    )


_PROTECTIONS = codecs.ListOf(codecs.Choice(PodProtection))


@dataclass(frozen=True, kw_only=True, slots=True)
class PodProtections:
    extra_enabled: tuple[PodProtection, ...] = field(
        default=(), metadata=fields.spec("extraEnabled", _PROTECTIONS)
    )
    default_disabled: tuple[PodProtection, ...] = field(
        default=(), metadata=fields.spec("defaultDisabled", _PROTECTIONS)
    )
    config: PodProtectionsConfig | None = field(
        default=None, metadata=fields.spec("config", fields.Nested(PodProtectionsConfig))
    )

    def check(self, path: FieldPath, errors: Errors, failed: frozenset[str]) -> None:
        lists = (
            ("extraEnabled", self.extra_enabled, EXTRA_PROTECTIONS),
            ("defaultDisabled", self.default_disabled, DEFAULT_PROTECTIONS),
        )
        for key, chosen, allowed in lists:
            seen: set[PodProtection] = set()
            for position, protection in enumerate(chosen):
                entry = path.child(key).index(position)
                if protection not in allowed:
                    errors.add(
                        entry, f"{protection} cannot be used here; allowed: {', '.join(allowed)}"
                    )
                if protection in seen:
                    errors.add(entry, f"{protection} is listed twice")
                seen.add(protection)
        pvc = self.config.pods_with_pvc if self.config else None
        if pvc is not None and PodProtection.PODS_WITH_PVC in self.extra_enabled:
            classes = path.child("config").child("PodsWithPVC").child("protectedStorageClasses")
            for position, storage_class in enumerate(pvc.protected_storage_classes):
                if not storage_class.name:
                    errors.add(classes.index(position).child("name"), "required")


@dataclass(frozen=True, kw_only=True, slots=True)
class DefaultEvictorArgs(fields.PluginArgs):
    KIND: ClassVar[str] = "DefaultEvictorArgs"

    node_selector: LabelSelector | None = field(
        default=None, metadata=fields.spec("nodeSelector", selectors.STRING)
    )
    label_selector: LabelSelector | None = field(
        default=None, metadata=fields.spec("labelSelector", selectors.MAPPING)
    )
    namespace_label_selector: LabelSelector | None = field(
        default=None, metadata=fields.spec("namespaceLabelSelector", selectors.MAPPING)
    )
    priority_threshold: PriorityThreshold | None = field(
        default=None, metadata=fields.spec("priorityThreshold", common.PRIORITY_THRESHOLD)
    )
    node_fit: bool = field(default=True, metadata=fields.spec("nodeFit", codecs.BOOL))
    min_replicas: int = field(default=0, metadata=fields.spec("minReplicas", codecs.NON_NEGATIVE))
    min_pod_age: timedelta | None = field(
        default=None, metadata=fields.spec("minPodAge", codecs.DURATION)
    )
    # Upstream treats "" as Preferred; the default is written out as Preferred.
    no_eviction_policy: NoEvictionPolicy = field(
        default=NoEvictionPolicy.PREFERRED,
        metadata=fields.spec(
            "noEvictionPolicy",
            codecs.Choice(NoEvictionPolicy, aliases={"": NoEvictionPolicy.PREFERRED}),
        ),
    )
    pod_protections: PodProtections = field(
        default_factory=PodProtections,
        metadata=fields.spec("podProtections", fields.Nested(PodProtections)),
    )
    # Deprecated upstream in favour of podProtections; still honoured.
    evict_local_storage_pods: bool = field(
        default=False, metadata=fields.spec("evictLocalStoragePods", codecs.BOOL)
    )
    evict_daemon_set_pods: bool = field(
        default=False, metadata=fields.spec("evictDaemonSetPods", codecs.BOOL)
    )
    evict_system_critical_pods: bool = field(
        default=False, metadata=fields.spec("evictSystemCriticalPods", codecs.BOOL)
    )
    ignore_pvc_pods: bool = field(default=False, metadata=fields.spec("ignorePvcPods", codecs.BOOL))
    ignore_pods_without_pdb: bool = field(
        default=False, metadata=fields.spec("ignorePodsWithoutPDB", codecs.BOOL)
    )
    evict_failed_bare_pods: bool = field(
        default=False, metadata=fields.spec("evictFailedBarePods", codecs.BOOL)
    )

    def check(self, path: FieldPath, errors: Errors, failed: frozenset[str]) -> None:
        deprecated = (
            self.evict_local_storage_pods
            or self.evict_daemon_set_pods
            or self.evict_system_critical_pods
            or self.ignore_pvc_pods
            or self.ignore_pods_without_pdb
            or self.evict_failed_bare_pods
        )
        protections = self.pod_protections
        if deprecated and (protections.extra_enabled or protections.default_disabled):
            errors.add(
                path.child("podProtections"),
                "cannot be combined with the deprecated evict*/ignore* fields; use one or the other",
            )
