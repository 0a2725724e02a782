"""Kubernetes Events (core/v1) so `kubectl describe` shows what nodeqos did and why.

Best effort by design: an Event that cannot be written is logged and dropped,
never raised into the caller's control flow (an eviction must not fail because
its Event did).
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kube import rest

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"


@dataclass(frozen=True, slots=True)
class ObjectRef:
    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    api_version: str = "v1"

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectRef:
        meta = obj.get("metadata", {})
        return cls(
            kind=str(obj.get("kind", "")),
            name=str(meta.get("name", "")),
            namespace=str(meta.get("namespace", "")),
            uid=str(meta.get("uid", "")),
            api_version=str(obj.get("apiVersion", "v1")),
        )


class Recorder:
    """Writes Events from one component (e.g. `nodeqos-agent` on node n1)."""

    def __init__(self, client: rest.Rest, component: str, host: str = "") -> None:
        self._client = client
        self.component = component
        self.host = host

    def event(self, ref: ObjectRef, event_type: str, reason: str, message: str) -> bool:
        namespace = ref.namespace or "default"
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{ref.name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": {
                "kind": ref.kind,
                "name": ref.name,
                "namespace": ref.namespace,
                "uid": ref.uid,
                "apiVersion": ref.api_version,
            },
            "type": event_type,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": self.component, "host": self.host},
            "reportingComponent": self.component,
            "reportingInstance": self.host or self.component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self._client.create(rest.object_path("", "v1", "events", namespace=namespace), body)
        except (rest.ApiError, rest.ApiUnavailable) as err:
            log.warning(
                "could not record event %s on %s %s/%s: %s",
                reason,
                ref.kind,
                ref.namespace,
                ref.name,
                err,
            )
            return False
        return True
