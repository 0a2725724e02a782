"""A ClusterColocationProfile applied to a pod in-process, pure: the webhook path.

Where the API server does not serve `MutatingAdmissionPolicy` v1 (Kubernetes 1.34-1.35),
nodeqos-manager's own webhook (`/profiles`, `manager.probability.Server`) applies the
profiles. This module is its semantics, and they are the rendered policy's
(`manager.colocationprofile`, whose docstring is the contract) step by step: it reads the
same parsed `colocationprofile.Profile` (a profile either path refuses, both refuse) and
gives the same pod. Imports `kube` and `manager.colocationprofile` only.

Every step is idempotent, so a pod mutated by both paths while they switch (both
configurations present for a moment) comes out as if mutated once: values are set, not
added to; a label suffix is appended only to a value not already ending with it (the
rendered policy has the same guard); the cpu/memory translation finds nothing left to move
the second time; the patch merge is a merge.

Probability 1-99% is drawn here, per pod, with `manager.probability.applies` (p% applies
when the draw 0..99 is at most p, i.e. (p+1)/100); no annotation round trip.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kube import quantity, selectors
from manager import colocationprofile, probability

# Koordinator's ResourceNameMap: priority class -> (cpu name, memory name)
_EXTENDED = {
    "koord-batch": ("kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"),
    "koord-mid": ("kubernetes.io/mid-cpu", "kubernetes.io/mid-memory"),
}
# The rendered policy unrolls its expression over this many containers (init: half).
_LIMITS = {
    "containers": colocationprofile.MAX_CONTAINERS,
    "initContainers": colocationprofile.MAX_CONTAINERS // 2,
}
# profilepatch's shapes for the lists it merges item by item: field path -> merge key.
_LIST_KEYS = {
    "spec.containers": "name",
    "spec.initContainers": "name",
    "spec.containers.env": "name",
    "spec.initContainers.env": "name",
    "spec.containers.volumeMounts": "mountPath",
    "spec.initContainers.volumeMounts": "mountPath",
}
_REPLACED = frozenset({"spec.tolerations"})


@dataclass(frozen=True, slots=True)
class Applied:
    """A profile as the webhook applies it: its PriorityClass's value and preemptionPolicy
    looked up by the caller, as `colocationprofile.render` takes them."""

    profile: colocationprofile.Profile
    priority_value: int | None = None
    preemption_policy: str | None = None


def matches(
    profile: colocationprofile.Profile, pod: Mapping[str, Any], namespace_labels: Mapping[str, str]
) -> bool:
    """The binding's matchResources: the namespace's labels and the pod's (None selects all)."""
    for raw, labels in (
        (profile.namespace_selector, namespace_labels),
        (profile.selector, (pod.get("metadata") or {}).get("labels") or {}),
    ):
        if raw is not None and not selectors.LabelSelector.from_api(raw).matches(labels):
            return False
    return True


def priority_class(pod: Mapping[str, Any]) -> str:
    """The pod's Koordinator priority class (`colocationprofile.PRIORITY_CLASS_EXPR`)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if colocationprofile.LABEL_PRIORITY_CLASS in labels:
        return str(labels[colocationprofile.LABEL_PRIORITY_CLASS])
    value = (pod.get("spec") or {}).get("priority")
    if isinstance(value, int):
        for low, name in ((9000, "koord-prod"), (7000, "koord-mid"), (5000, "koord-batch")):
            if low <= value <= low + 999:
                return name
        if 3000 <= value <= 3999:
            return "koord-free"
    return "koord-batch" if labels.get(colocationprofile.LABEL_QOS) == "BE" else ""


def _millicores(value: Any) -> str:
    # The policy: int(quantity(v).asApproximateFloat() * 1000.0 + 0.5)
    millis = quantity.parse_quantity(value) * 1000 + Fraction(1, 2)
    return str(millis.numerator // millis.denominator)


def _translate(pod: dict[str, Any]) -> None:
    names = _EXTENDED.get(priority_class(pod))
    if names is None:
        return
    spec = pod.get("spec") or {}
    for kind, limit in _LIMITS.items():
        for container in (spec.get(kind) or [])[:limit]:
            resources = container.get("resources") or {}
            for section in ("requests", "limits"):
                values = resources.get(section)
                if not isinstance(values, dict):
                    continue
                if "cpu" in values:
                    values[names[0]] = _millicores(values.pop("cpu"))
                if "memory" in values:
                    values[names[1]] = values.pop("memory")


def _merge(path: str, target: Any, patch: Any) -> Any:
    """`patch` merged into `target` with the shapes `manager.profilepatch` accepted."""
    if path in _REPLACED or not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    merged = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        where = f"{path}.{key}"
        if where in _LIST_KEYS:
            merged[key] = _merge_list(where, merged.get(key), value)
        else:
            merged[key] = _merge(where, merged.get(key), value)
    return merged


def _merge_list(path: str, target: Any, patch: list[Any]) -> list[Any]:
    key = _LIST_KEYS[path]
    items = [dict(item) for item in (target or [])]
    for entry in patch:
        for i, item in enumerate(items):
            if item.get(key) == entry[key]:
                items[i] = _merge(path, item, entry)
                break
        else:
            items.append(_merge(path, {}, entry))
    return items


def mutate(applied: Applied, pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod as the profile's rendered policy leaves it (selectors and probability aside)."""
    profile = applied.profile
    out = copy.deepcopy(dict(pod))
    meta = out.setdefault("metadata", {})
    spec = out.setdefault("spec", {})
    if profile.labels:
        meta["labels"] = {**(meta.get("labels") or {}), **profile.labels}
    if profile.annotations:
        meta["annotations"] = {**(meta.get("annotations") or {}), **profile.annotations}
    for key, mapping in (
        ("labels", profile.label_keys_mapping),
        ("annotations", profile.annotation_keys_mapping),
    ):
        if mapping:
            before = dict(meta.get(key) or {})  # every mapping reads the pod before any
            meta[key] = {**before, **{new: before.get(old, "") for old, new in mapping.items()}}
    labels = meta.get("labels")
    for key, suffix in sorted(profile.label_suffixes.items()):
        if labels and key in labels and not str(labels[key]).endswith(suffix):
            labels[key] = str(labels[key]) + suffix
    extra: dict[str, str] = {}
    if profile.qos_class:
        extra[colocationprofile.LABEL_QOS] = profile.qos_class
    if profile.koordinator_priority is not None:
        extra[colocationprofile.LABEL_PRIORITY] = str(profile.koordinator_priority)
    if extra:
        meta["labels"] = {**(meta.get("labels") or {}), **extra}
    if profile.scheduler_name:
        spec["schedulerName"] = profile.scheduler_name
    if profile.priority_class_name:
        spec["priorityClassName"] = profile.priority_class_name
        if applied.priority_value is not None:
            spec["priority"] = int(applied.priority_value)
        if applied.preemption_policy is not None:
            spec["preemptionPolicy"] = applied.preemption_policy
    if profile.patch_source:
        for part in ("metadata", "spec"):
            if part in profile.patch_source:
                out[part] = _merge(part, out.get(part), profile.patch_source[part])
    _translate(out)
    return out


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def patch_ops(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[dict[str, Any]]:
    """JSONPatch ops taking `before` to `after`: whole labels/annotations maps and the whole
    spec, each only if changed (`add` replaces a member that exists, RFC 6902 4.1)."""
    ops: list[dict[str, Any]] = []
    old_meta, new_meta = before.get("metadata") or {}, after.get("metadata") or {}
    if "metadata" not in before and new_meta:
        return [{"op": "add", "path": "/metadata", "value": new_meta}] + (
            [{"op": "add", "path": "/spec", "value": after.get("spec")}]
            if before.get("spec") != after.get("spec")
            else []
        )
    for key in sorted(set(old_meta) | set(new_meta)):
        if old_meta.get(key) != new_meta.get(key) and key in new_meta:
            ops.append({"op": "add", "path": f"/metadata/{_pointer(key)}", "value": new_meta[key]})
    if before.get("spec") != after.get("spec"):
        ops.append({"op": "add", "path": "/spec", "value": after.get("spec")})
    return ops


def apply_all(
    profiles: Sequence[Applied],
    pod: Mapping[str, Any],
    namespace_labels: Mapping[str, str],
    draw: Callable[[], int],
) -> tuple[dict[str, Any], list[str]]:
    """Every matching profile in name order (Koordinator's order); the pod and the names of
    the profiles applied. A probability-0 profile never applies; 1-99% is drawn per pod."""
    out = copy.deepcopy(dict(pod))
    names: list[str] = []
    for applied in sorted(profiles, key=lambda a: a.profile.name):
        profile = applied.profile
        if profile.never or not matches(profile, out, namespace_labels):
            continue
        if profile.percent < 100 and not probability.applies(profile.percent, draw()):
            continue
        out = mutate(applied, out)
        names.append(profile.name)
    return out, names


CONFIGURATION = "nodeqos-colocation-profiles"
PATH = "/profiles"


def review_response(
    review: Mapping[str, Any],
    profiles: Sequence[Applied],
    namespace_labels: Callable[[str], Mapping[str, str] | None],
    draw: Callable[[], int],
    record: Callable[[str], None] = lambda _outcome: None,
) -> dict[str, Any]:
    """The AdmissionReview answer for one pod: always allowed, with a JSONPatch when a
    profile changed it. `namespace_labels(name)` is the Namespace informer's view (None
    when not known yet: profiles with a namespaceSelector are then skipped, fail-open).
    `record` gets "mutated", "unchanged" or "namespace-unknown"."""
    import base64
    import json

    request = review.get("request") or {}
    response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": True}
    pod = request.get("object") or {}
    namespace = str(request.get("namespace") or (pod.get("metadata") or {}).get("namespace", ""))
    labels = namespace_labels(namespace)
    usable = list(profiles)
    if labels is None:
        record("namespace-unknown")
        usable = [a for a in profiles if a.profile.namespace_selector is None]
    out, names = apply_all(usable, pod, labels or {}, draw)
    ops = patch_ops(pod, out)
    if ops:
        record("mutated")
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
        response["auditAnnotations"] = {"profiles": ",".join(names)}
    elif labels is not None:
        record("unchanged")
    return {
        "apiVersion": review.get("apiVersion", "admission.k8s.io/v1"),
        "kind": "AdmissionReview",
        "response": response,
    }


def configuration(client_config: Mapping[str, Any], ca_pem: bytes) -> dict[str, Any]:
    """The one MutatingWebhookConfiguration of the webhook path: every pod CREATE (the
    server applies each profile's selectors), `failurePolicy: Ignore`, 3 s, no reinvocation.

    `client_config` is `{"service": {namespace, name, port}}` or `{"url": "https://..."}`."""
    import base64

    client = {k: dict(v) if isinstance(v, Mapping) else v for k, v in client_config.items()}
    if "service" in client:
        client["service"]["path"] = PATH
    else:
        client["url"] = str(client["url"]).rstrip("/") + PATH
    client["caBundle"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {
            "name": CONFIGURATION,
            "labels": {"app.kubernetes.io/managed-by": "nodeqos-manager"},
        },
        "webhooks": [
            {
                "name": "profiles.colocation.nodeqos.io",
                "clientConfig": client,
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                        "scope": "Namespaced",
                    }
                ],
                "failurePolicy": "Ignore",
                "sideEffects": "None",
                "timeoutSeconds": 3,
                "admissionReviewVersions": ["v1"],
                "reinvocationPolicy": "Never",
            }
        ],
    }
