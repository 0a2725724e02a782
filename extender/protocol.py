"""The kube-scheduler extender wire format (`k8s.io/kube-scheduler/extender/v1`).

The Go types carry no JSON tags, so fields travel under their Go names
(`Pod`, `Nodes`, `NodeNames`, `FailedNodes`, `Host`, `Score`); Go decodes keys
case-insensitively, and so does `decode_args` here. With `nodeCacheCapable: true`
(what the shipped configuration sets) the scheduler sends `NodeNames` only; a
scheduler configured without it sends whole `Nodes`, and the answer then names
nodes the same way.
"""

from __future__ import annotations

import itertools
import json
import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_SAFE_NAMES = re.compile(r"[a-z0-9.\-]*")
_PRIORITY = '{"Host":"%s","Score":%d},'
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


def filter_result(
    args: ExtenderArgs, passed: Sequence[str], failed: Mapping[str, str], error: str = ""
) -> bytes:
    """An ExtenderFilterResult naming nodes the way the request did."""
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

    Node names are DNS subdomains, which need no JSON escaping: formatting them
    directly is several times faster than `json.dumps` of 5,000 dicts. Anything
    else goes through `json.dumps`.
    """
    if not scores:
        return b"[]"
    if _SAFE_NAMES.fullmatch("".join(map(operator.itemgetter(0), scores))):
        flat = tuple(itertools.chain.from_iterable(scores))
        return ("[" + (_PRIORITY * len(scores))[:-1] % flat + "]").encode()
    return json.dumps(
        [{"Host": host, "Score": score} for host, score in scores], separators=(",", ":")
    ).encode()
