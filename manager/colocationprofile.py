"""A ClusterColocationProfile as a MutatingAdmissionPolicy and its binding, rendered, pure.

Koordinator applies a profile in its pod webhook
(`pkg/webhook/pod/mutating/cluster_colocation_profile.go`); nodeqos-manager
instead renders one `MutatingAdmissionPolicy` + `MutatingAdmissionPolicyBinding`
(`admissionregistration.k8s.io/v1`) per profile, so the API server applies it
itself and no server of ours sits in the pod-creation path (but for the fail-open
probability webhook, `manager.probability`). Imports `manager.profilepatch` and
`manager.probability` (its annotation key). On pod CREATE, for
pods in the profile's namespaces (`namespaceSelector`) matching its `selector`:

1. labels and annotations of the profile are set; `qosClass` becomes label
   `koordinator.sh/qosClass`, `koordinatorPriority` label `koordinator.sh/priority`,
   `schedulerName` and `priorityClassName` the pod's fields. CEL cannot read a
   PriorityClass, so its value is resolved when rendering (`priority_value`) and
   written to `spec.priority`, as Koordinator's webhook does after its lookup;
   the manager re-renders when the PriorityClass changes.
2. the pod's Koordinator priority class (label `koordinator.sh/priority-class`,
   else the `spec.priority` band, else BE -> batch) decides the translation of
   every container's and init container's `cpu`/`memory` requests and limits:
   batch -> `kubernetes.io/batch-cpu` (millicores, an integer) and
   `kubernetes.io/batch-memory` (the same quantity); mid -> `kubernetes.io/mid-*`.

Then, in Koordinator's order, each its own mutation so each sees the previous one's result:
`labelKeysMapping`/`annotationKeysMapping` copy a label's (annotation's) value to a new key
(a missing source key gives "", as Koordinator's `pod.Labels[new] = pod.Labels[old]`),
`labelSuffixes` append to a label that is present, and `patch` is rendered by
`manager.profilepatch` (what it cannot render is refused, naming the field).

What CEL cannot express, and what happens instead (`ProfileError` names the field):

- `probability` (0-100 or a percentage): Koordinator draws a random number per
  pod; CEL has no randomness, and at admission a pod may have no name or UID yet
  to hash. 100% (or unset) renders the profile; 0 renders nothing (it never
  applies); anything between is drawn by the manager's webhook (`manager.probability`),
  which annotates the pod; every mutation of the policy is a no-op unless that annotation
  says `apply`, with `reinvocationPolicy: IfNeeded` (policies run before webhooks; the
  webhook's change makes the API server run them again; a policy a matchCondition
  skipped is not run again, so none is used). Label suffixes are then appended only to a
  value not already ending with them, so the second run does not append twice.
- Koordinator applies all matching profiles in name order and translates
  resources once at the end; here each profile is its own policy (the API server
  runs policies independently), and the translation is idempotent, so it runs
  in each.

CPU millicores come from `quantity(...).asApproximateFloat()` rounded to the
nearest millicore (Koordinator's `MilliValue` rounds a fraction of a millicore up).
`failurePolicy: Ignore`: a CEL error never blocks pod creation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from manager import probability as probability_webhook
from manager import profilepatch

GROUP_VERSION = "admissionregistration.k8s.io/v1"
LABEL_QOS = "koordinator.sh/qosClass"
LABEL_PRIORITY = "koordinator.sh/priority"
LABEL_PRIORITY_CLASS = "koordinator.sh/priority-class"
ANNOTATION_PREFIX = probability_webhook.ANNOTATION_PREFIX
QOS_CLASSES = ("LSE", "LSR", "LS", "BE", "SYSTEM")
MAX_CONTAINERS = 16  # per list; the patch expression is unrolled over indexes
_MAPPINGS = ("labelKeysMapping", "annotationKeysMapping", "labelSuffixes")
_KNOWN = frozenset(
    {
        "patch",
        *_MAPPINGS,
        "namespaceSelector",
        "selector",
        "probability",
        "qosClass",
        "priorityClassName",
        "koordinatorPriority",
        "labels",
        "annotations",
        "schedulerName",
    }
)
# Koordinator's ResourceNameMap: priority class -> (cpu name, memory name)
_EXTENDED = {
    "koord-batch": ("kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"),
    "koord-mid": ("kubernetes.io/mid-cpu", "kubernetes.io/mid-memory"),
}


class ProfileError(ValueError):
    """The profile cannot be rendered; the message names every field and why."""


@dataclass(frozen=True, slots=True)
class Profile:
    """The parts of a ClusterColocationProfile spec that are rendered."""

    name: str
    qos_class: str = ""
    priority_class_name: str = ""
    koordinator_priority: int | None = None
    scheduler_name: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    namespace_selector: Mapping[str, Any] | None = None
    selector: Mapping[str, Any] | None = None
    label_keys_mapping: Mapping[str, str] = field(default_factory=dict)
    annotation_keys_mapping: Mapping[str, str] = field(default_factory=dict)
    label_suffixes: Mapping[str, str] = field(default_factory=dict)
    patch: tuple[Mapping[str, Any], ...] = ()  # the patch's mutations, rendered when parsed
    # The patch as written, kept only once `profilepatch` accepted it: the webhook path
    # (`manager.profilemutation`) merges it in-process, so both paths refuse the same patches.
    patch_source: Mapping[str, Any] | None = None
    never: bool = False  # probability 0: the profile applies to no pod
    percent: int = 100  # 1-99: decided per pod by the manager's webhook (`manager.probability`)

    @classmethod
    def from_api(cls, obj: Mapping[str, Any]) -> Profile:
        """Parse a ClusterColocationProfile; ProfileError lists every problem with its path."""
        name = str((obj.get("metadata") or {}).get("name", ""))
        spec = obj.get("spec") or {}
        errors: list[str] = []
        for key in spec:
            if key not in _KNOWN:
                errors.append(f"spec.{key}: unknown field")
        qos = spec.get("qosClass") or ""
        if qos and qos not in QOS_CLASSES:
            errors.append(f"spec.qosClass: must be one of {', '.join(QOS_CLASSES)}, got {qos!r}")
        never = False
        percent: int | None = 100
        probability = spec.get("probability")
        if probability is not None:
            percent = _percent(probability)
            if percent is None:
                errors.append(
                    f"spec.probability: must be 0-100 or a percentage, got {probability!r}"
                )
            elif percent == 0:
                never = True
            elif percent < 100 and len(name) > 63:
                errors.append(
                    "metadata.name: a profile with a probability between 1% and 99% names the"
                    f" pod annotation {ANNOTATION_PREFIX}<name>, so at most 63 characters"
                    f" (got {len(name)}); shorten the name"
                )
        for key in ("labels", "annotations", *_MAPPINGS):
            value = spec.get(key) or {}
            if not isinstance(value, Mapping) or not all(
                isinstance(v, str) for v in value.values()
            ):
                errors.append(f"spec.{key}: must map strings to strings")
        kp = spec.get("koordinatorPriority")
        if kp is not None and (not isinstance(kp, int) or isinstance(kp, bool)):
            errors.append(f"spec.koordinatorPriority: must be an integer, got {kp!r}")
        patch = profilepatch.mutations(spec.get("patch"), errors)
        if errors:
            raise ProfileError(f"ClusterColocationProfile {name}: " + "; ".join(errors))
        return cls(
            name=name,
            qos_class=qos,
            priority_class_name=spec.get("priorityClassName") or "",
            koordinator_priority=kp,
            scheduler_name=spec.get("schedulerName") or "",
            labels=dict(spec.get("labels") or {}),
            annotations=dict(spec.get("annotations") or {}),
            namespace_selector=spec.get("namespaceSelector"),
            selector=spec.get("selector"),
            label_keys_mapping=dict(spec.get("labelKeysMapping") or {}),
            annotation_keys_mapping=dict(spec.get("annotationKeysMapping") or {}),
            label_suffixes=dict(spec.get("labelSuffixes") or {}),
            patch=tuple(patch),
            patch_source=spec.get("patch") or None,
            never=never,
            percent=100 if percent is None else percent,
        )


def _percent(raw: Any) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw if 0 <= raw <= 100 else None
    if isinstance(raw, str) and raw.endswith("%") and raw[:-1].isdigit():
        value = int(raw[:-1])
        return value if value <= 100 else None
    return None


def _cel(value: str) -> str:
    return json.dumps(value)  # a JSON string literal is a valid CEL string literal


def _apply(meta: list[str], spec: list[str]) -> dict[str, Any] | None:
    parts = []
    if meta:
        parts.append("metadata: Object.metadata{" + ", ".join(meta) + "}")
    if spec:
        parts.append("spec: Object.spec{" + ", ".join(spec) + "}")
    if not parts:
        return None
    return {
        "patchType": "ApplyConfiguration",
        "applyConfiguration": {"expression": "Object{" + ", ".join(parts) + "}"},
    }


def _literal_map(key: str, values: Mapping[str, str]) -> list[str]:
    if not values:
        return []
    pairs = ", ".join(f"{_cel(k)}: {_cel(v)}" for k, v in sorted(values.items()))
    return [f"{key}: {{{pairs}}}"]


def _lookup(key: str, name: str) -> str:
    """CEL for the pod's label (annotation) `name`, "" when missing (Go's map read)."""
    return (
        f"(has(object.metadata.{key}) && {_cel(name)} in object.metadata.{key}"
        f" ? object.metadata.{key}[{_cel(name)}] : '')"
    )


def _mapping_mutation(profile: Profile) -> dict[str, Any] | None:
    meta: list[str] = []
    for key, mapping in (
        ("labels", profile.label_keys_mapping),
        ("annotations", profile.annotation_keys_mapping),
    ):
        if mapping:
            pairs = ", ".join(
                f"{_cel(new)}: {_lookup(key, old)}" for old, new in sorted(mapping.items())
            )
            meta.append(f"{key}: {{{pairs}}}")
    return _apply(meta, [])


def _suffix_mutation(profile: Profile) -> dict[str, Any] | None:
    if not profile.label_suffixes:
        return None
    ops = []
    for key, suffix in sorted(profile.label_suffixes.items()):
        pointer = "/metadata/labels/" + key.replace("~", "~0").replace("/", "~1")
        # Appended only to a value not already ending with it, on every path: a reinvoked
        # policy, and a pod mutated by both paths while they switch (docs/colocation.md).
        once = f" && !object.metadata.labels[{_cel(key)}].endsWith({_cel(suffix)})"
        ops.append(
            f"(has(object.metadata.labels) && {_cel(key)} in object.metadata.labels{once}"
            f" ? [JSONPatch{{op: 'replace', path: {_cel(pointer)},"
            f" value: object.metadata.labels[{_cel(key)}] + {_cel(suffix)}}}] : [])"
        )
    return {"patchType": "JSONPatch", "jsonPatch": {"expression": " + ".join(ops)}}


def _reinvoked(profile: Profile) -> bool:
    return 0 < profile.percent < 100


def _profile_mutations(
    profile: Profile, priority_value: int | None, preemption_policy: str | None
) -> list[dict[str, Any]]:
    """Koordinator's order: labels, annotations, key mappings, suffixes, scheduler, QoS,
    priority, patch; a mutation sees the pod as the ones before it left it."""
    first = _apply(
        _literal_map("labels", profile.labels) + _literal_map("annotations", profile.annotations),
        [],
    )
    labels: dict[str, str] = {}
    if profile.qos_class:
        labels[LABEL_QOS] = profile.qos_class
    if profile.koordinator_priority is not None:
        labels[LABEL_PRIORITY] = str(profile.koordinator_priority)
    spec: list[str] = []
    if profile.scheduler_name:
        spec.append(f"schedulerName: {_cel(profile.scheduler_name)}")
    if profile.priority_class_name:
        spec.append(f"priorityClassName: {_cel(profile.priority_class_name)}")
        if priority_value is not None:
            spec.append(f"priority: {int(priority_value)}")
        if preemption_policy is not None:
            # The Priority admission plugin has already given the pod the default
            # class's policy, and its validation refuses a pod whose policy differs
            # from its PriorityClass's ("must not be provided in pod spec"): a class
            # with preemptionPolicy Never blocked every matching pod's creation.
            spec.append(f"preemptionPolicy: {_cel(preemption_policy)}")
    found = [
        first,
        _mapping_mutation(profile),
        _suffix_mutation(profile),
        _apply(_literal_map("labels", labels), spec),
    ]
    return [m for m in found if m is not None] + [dict(m) for m in profile.patch]


# The pod's Koordinator priority class, as GetPodPriorityClassWithDefault decides it.
PRIORITY_CLASS_EXPR = (
    "has(object.metadata.labels) && " + _cel(LABEL_PRIORITY_CLASS) + " in object.metadata.labels"
    " ? object.metadata.labels[" + _cel(LABEL_PRIORITY_CLASS) + "]"
    " : has(object.spec.priority) && object.spec.priority >= 9000 && object.spec.priority <= 9999 ? 'koord-prod'"
    " : has(object.spec.priority) && object.spec.priority >= 7000 && object.spec.priority <= 7999 ? 'koord-mid'"
    " : has(object.spec.priority) && object.spec.priority >= 5000 && object.spec.priority <= 5999 ? 'koord-batch'"
    " : has(object.spec.priority) && object.spec.priority >= 3000 && object.spec.priority <= 3999 ? 'koord-free'"
    " : has(object.metadata.labels) && " + _cel(LABEL_QOS) + " in object.metadata.labels"
    " && object.metadata.labels[" + _cel(LABEL_QOS) + "] == 'BE' ? 'koord-batch' : ''"
)  # fmt: skip


def _container_ops(kind: str, index: int) -> str:
    """CEL list of JSONPatch ops moving one container's cpu/memory to the extended names."""
    c = f"object.spec.{kind}[{index}]"
    base = f"/spec/{kind}/{index}/resources"
    ops: list[str] = []
    for section in ("requests", "limits"):
        for resource, var in (("cpu", "variables.cpuName"), ("memory", "variables.memoryName")):
            value = (
                f"string(int(quantity({c}.resources.{section}.cpu).asApproximateFloat() * 1000.0 + 0.5))"
                if resource == "cpu"
                else f"{c}.resources.{section}.memory"
            )
            present = f"has({c}.resources.{section}) && {_cel(resource)} in {c}.resources.{section}"
            ops.append(
                f"({present} ? [JSONPatch{{op: 'add', path: {_cel(base + '/' + section + '/')} + {var},"
                f" value: {value}}}, JSONPatch{{op: 'remove', path: {_cel(base + '/' + section + '/' + resource)}}}] : [])"
            )
    return f"(size(object.spec.{kind}) > {index} ? " + " + ".join(ops) + " : [])"


def _resource_mutation() -> dict[str, Any]:
    chunks = [_container_ops("containers", i) for i in range(MAX_CONTAINERS)]
    inits = [_container_ops("initContainers", i) for i in range(MAX_CONTAINERS // 2)]
    expression = (
        "variables.cpuName == '' ? [] : "
        + " + ".join(chunks)
        + " + (has(object.spec.initContainers) ? "
        + " + ".join(inits)
        + " : [])"
    )
    return {"patchType": "JSONPatch", "jsonPatch": {"expression": expression}}


def _variables() -> list[dict[str, str]]:
    """The pod's priority class and the extended names it maps cpu and memory to ('' if none);
    JSON Pointer spells '/' as '~1'."""
    found = [{"name": "priorityClass", "expression": PRIORITY_CLASS_EXPR}]
    for var, i in (("cpuName", 0), ("memoryName", 1)):
        choice = " : ".join(
            f"variables.priorityClass == {_cel(p)} ? {_cel(names[i].replace('/', '~1'))}"
            for p, names in _EXTENDED.items()
        )
        found.append({"name": var, "expression": choice + " : ''"})
    return found


def render(
    profile: Profile, *, priority_value: int | None = None, preemption_policy: str | None = None
) -> list[dict[str, Any]]:
    """The policy and binding of `profile` (nothing for a probability-0 profile).

    `priority_value` and `preemption_policy` are the value and preemptionPolicy of the
    profile's PriorityClass, looked up by the caller (as Koordinator's webhook copies both).
    """
    if profile.never:
        return []
    name = f"nodeqos-colocation-{profile.name}"
    mutations = _profile_mutations(profile, priority_value, preemption_policy)
    mutations.append(_resource_mutation())
    policy: dict[str, Any] = {
        "apiVersion": GROUP_VERSION,
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "nodeqos-manager"}},
        "spec": {
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    }
                ]
            },
            "failurePolicy": "Ignore",
            "variables": _variables(),
            "reinvocationPolicy": "IfNeeded" if _reinvoked(profile) else "Never",
            "mutations": mutations,
        },
    }
    if _reinvoked(profile):
        # Not a matchCondition: a policy skipped by one is not run again after the webhook.
        # Run on the first pass as a no-op, it is reinvoked once the webhook has annotated.
        key = _cel(probability_webhook.annotation(profile.name))
        policy["spec"]["variables"].insert(
            0,
            {
                "name": "drawn",
                "expression": f"has(object.metadata.annotations) && {key} in object.metadata.annotations"
                f" && object.metadata.annotations[{key}] == 'apply'",
            },
        )
        for mutation in mutations:
            for kind, empty in (("applyConfiguration", "Object{}"), ("jsonPatch", "[]")):
                if kind in mutation:
                    expression = mutation[kind]["expression"]
                    mutation[kind] = {"expression": f"!variables.drawn ? {empty} : ({expression})"}
    match: dict[str, Any] = {}
    if profile.namespace_selector is not None:
        match["namespaceSelector"] = dict(profile.namespace_selector)
    if profile.selector is not None:
        match["objectSelector"] = dict(profile.selector)
    binding: dict[str, Any] = {
        "apiVersion": GROUP_VERSION,
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "nodeqos-manager"}},
        "spec": {"policyName": name},
    }
    if match:
        binding["spec"]["matchResources"] = match
    return [policy, binding]
