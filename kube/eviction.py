"""Pod eviction through the Eviction API (`policy/v1`), with outcomes callers can act on.

The API server enforces PodDisruptionBudgets here: a 429 means a budget would be
violated (or is still being computed) and must be reported as such — never
retried in a tight loop, never turned into a delete. A UID precondition makes
sure we evict the pod we decided on, not a namesake created since.

Callers: the agent's evictor (qosmanager) and the descheduler's eviction backend.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from kube import rest


class Outcome(enum.Enum):
    EVICTED = "evicted"
    PDB_BLOCKED = "pdb_blocked"  # HTTP 429 from a PodDisruptionBudget
    NOT_FOUND = "not_found"  # the pod is gone already
    UID_MISMATCH = "uid_mismatch"  # a different pod now has that name
    FORBIDDEN = "forbidden"  # RBAC: we may not create pods/eviction
    UNAVAILABLE = "unavailable"  # the API server could not be reached
    FAILED = "failed"  # any other error


@dataclass(frozen=True, slots=True)
class Result:
    outcome: Outcome
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.EVICTED


def eviction_body(
    namespace: str,
    name: str,
    uid: str | None,
    grace_period_seconds: int | None,
    annotations: dict[str, str] | None = None,
) -> dict[str, object]:
    options: dict[str, object] = {}
    if uid:
        options["preconditions"] = {"uid": uid}
    if grace_period_seconds is not None:
        options["gracePeriodSeconds"] = grace_period_seconds
    metadata: dict[str, object] = {"name": name, "namespace": namespace}
    if annotations:
        # who asked and why, for admission webhooks and audit logs (the API
        # server does not persist the Eviction; descheduler v0.35 sends the same keys)
        metadata["annotations"] = dict(annotations)
    body: dict[str, object] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": metadata,
    }
    if options:
        body["deleteOptions"] = options
    return body


def evict(
    client: rest.Rest,
    namespace: str,
    name: str,
    *,
    uid: str | None = None,
    grace_period_seconds: int | None = None,
    annotations: dict[str, str] | None = None,
) -> Result:
    """POST pods/<name>/eviction and classify what the server said."""
    path = rest.object_path("", "v1", "pods", name, namespace=namespace, subresource="eviction")
    body = eviction_body(namespace, name, uid, grace_period_seconds, annotations)
    return _outcome(lambda: client.create(path, body))


def delete(
    client: rest.Rest,
    namespace: str,
    name: str,
    *,
    uid: str | None = None,
    grace_period_seconds: int | None = None,
    annotations: dict[str, str] | None = None,
) -> Result:
    """DELETE the pod directly (bypasses PodDisruptionBudgets; opt-in backends only)."""
    path = rest.object_path("", "v1", "pods", name, namespace=namespace)
    options = eviction_body(namespace, name, uid, grace_period_seconds).get("deleteOptions")
    body = {"apiVersion": "v1", "kind": "DeleteOptions", **(options or {})}  # type: ignore[dict-item]
    return _outcome(lambda: client.delete(path, body))


def _outcome(send: Callable[[], object]) -> Result:
    """Make the one call of `evict` or `delete` and say how it went."""
    try:
        send()
    except rest.ApiUnavailable as err:
        return Result(Outcome.UNAVAILABLE, str(err))
    except rest.ApiError as err:
        return Result(_classify(err), err.message)
    return Result(Outcome.EVICTED)


def _classify(err: rest.ApiError) -> Outcome:
    if err.too_many_requests:
        return Outcome.PDB_BLOCKED
    if err.not_found:
        return Outcome.NOT_FOUND
    if err.conflict:
        return Outcome.UID_MISMATCH
    if err.status == 403:
        return Outcome.FORBIDDEN
    return Outcome.FAILED
