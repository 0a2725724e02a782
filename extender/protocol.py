"""The kube-scheduler extender wire format (`k8s.io/kube-scheduler/extender/v1`).

The Go types carry no JSON tags, so fields travel under their Go names
(`Pod`, `Nodes`, `NodeNames`, `FailedNodes`, `Host`, `Score`); Go decodes keys
case-insensitively, and so does `decode_args` here. With `nodeCacheCapable: true`
(what the shipped configuration sets) the scheduler sends `NodeNames` only; a
scheduler configured without it sends whole `Nodes`, and the answer then names
nodes the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_SAFE_NAME = re.compile(r"[a-z0-9.\-]+")
# Names already checked, and the HostPriority text of (name, score) pairs: a node's
# answer repeats call after call, so each is formatted once, not once per call.
# Both are bounded: past the limit they start over.
_CACHE_LIMIT = 100_000
_safe_names: set[str] = set()
_priority_text: dict[tuple[str, int], str] = {}
MIN_PRIORITY = 0
MAX_PRIORITY = 10


class BadRequest(ValueError):
    """The request body is not an ExtenderArgs; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class ExtenderArgs:
    pod: Mapping[str, Any]
    node_names: list[str]
    nodes: list[Mapping[str, Any]] | None  # whole Node objects when not node-cache capable


def _field(body: Mapping[str, Any], name: str) -> Any:
    if name in body:
        return body[name]
    lowered = name.lower()
    for key, value in body.items():
        if isinstance(key, str) and key.lower() == lowered:
            return value
    return None


def decode_args(data: bytes) -> ExtenderArgs:
    """Parse an ExtenderArgs body; raises `BadRequest`."""
    try:
        body = json.loads(data)
    except ValueError as err:
        raise BadRequest(f"the body is not JSON: {err}") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object (an ExtenderArgs)")
    pod = _field(body, "Pod")
    if not isinstance(pod, dict) or not isinstance(pod.get("metadata"), dict):
        raise BadRequest("Pod: missing or not a v1.Pod object")
    names = _field(body, "NodeNames")
    nodes = _field(body, "Nodes")
    if names is not None:
        # set(map(type, ...)) runs in C: a tenth of a per-name isinstance loop at 5,000 names
        if not isinstance(names, list) or not set(map(type, names)) <= {str}:
            raise BadRequest("NodeNames: must be a list of node names")
        return ExtenderArgs(pod, names, None)
    if nodes is None:
        return ExtenderArgs(pod, [], None)
    items = nodes.get("items") if isinstance(nodes, dict) else None
    if not isinstance(items, list):
        raise BadRequest("Nodes: must be a v1.NodeList with items")
    try:
        return ExtenderArgs(pod, [str(n["metadata"]["name"]) for n in items], items)
    except (KeyError, TypeError):
        raise BadRequest("Nodes.items: every node needs metadata.name") from None


def _plain(names: Sequence[str]) -> bool:
    """True when every name is a DNS subdomain (needs no JSON escaping)."""
    if _safe_names.issuperset(names):
        return True
    fresh = [name for name in names if name not in _safe_names]
    if not all(map(_SAFE_NAME.fullmatch, fresh)):
        return False
    if len(_safe_names) + len(fresh) > _CACHE_LIMIT:
        _safe_names.clear()
    _safe_names.update(fresh)
    return True


def filter_result(
    args: ExtenderArgs, passed: Sequence[str], failed: Mapping[str, str], error: str = ""
) -> bytes:
    """An ExtenderFilterResult naming nodes the way the request did."""
    if args.nodes is None and not failed and not error and _plain(passed):
        # The common answer (every node passes) without json.dumps: a sixth of its cost.
        listed = '"' + '","'.join(passed) + '"' if passed else ""
        return ('{"FailedNodes":{},"Error":"","NodeNames":[' + listed + "]}").encode()
    out: dict[str, Any] = {"FailedNodes": dict(failed), "Error": error}
    if args.nodes is None:
        out["NodeNames"] = list(passed)
    else:
        keep = set(passed)
        out["Nodes"] = {
            "kind": "NodeList",
            "apiVersion": "v1",
            "metadata": {},
            "items": [n for n in args.nodes if n["metadata"]["name"] in keep],
        }
    return json.dumps(out, separators=(",", ":")).encode()


def filter_error(message: str) -> bytes:
    return json.dumps({"Error": message}).encode()


def priorities(scores: Sequence[tuple[str, int]]) -> bytes:
    """A HostPriorityList.

    Node names are DNS subdomains, which need no JSON escaping, so each
    (name, score) entry is formatted once and reused from then on: a quarter of
    the cost of `json.dumps` of the dicts. Anything else goes through `json.dumps`.
    """
    if not scores:
        return b"[]"
    text = _priority_text
    try:
        return ("[" + ",".join(map(text.__getitem__, scores)) + "]").encode()
    except KeyError:  # a few nodes' scores moved since the last call
        missing = [entry for entry in scores if entry not in text]
    if not _plain([host for host, _ in missing]):
        return json.dumps(
            [{"Host": host, "Score": score} for host, score in scores], separators=(",", ":")
        ).encode()
    if len(text) + len(missing) > _CACHE_LIMIT:
        text.clear()
        missing = list(scores)
    for host, score in missing:
        text[host, score] = f'{{"Host":"{host}","Score":{score}}}'
    return ("[" + ",".join(map(text.__getitem__, scores)) + "]").encode()
