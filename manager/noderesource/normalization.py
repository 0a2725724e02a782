"""CPU normalization and resource amplification annotations of a Node, as the formulas honour them.

Koordinator marks a node whose CPUs are faster than the cluster's baseline with
`node.koordinator.sh/cpu-normalization-ratio` (e.g. "1.20", written by its
`cpunormalization` slo-controller plugin from the node's CPU model), and its
`resourceamplification` plugin and node webhook amplify the node's native
`allocatable.cpu` by `node.koordinator.sh/resource-amplification-ratio`
(`{"cpu": 1.2}`), keeping the kubelet's figure in `node.koordinator.sh/raw-allocatable`.
Names and parsing from `apis/extension/cpu_normalization.go` and
`node_resource_amplification.go` at commit a7a1b76bbf81abd26f9c377de1f31a60dd965f6e.

What nodeqos does with them:

- `amplify_cpu`: batch-cpu is written times the normalization ratio when it is above 1
  (Koordinator's `PrepareNodeForResource`: an absent, unparsable or <= 1 ratio leaves it
  as computed; a fractional result rounds up to a whole millicore). nodeqos amplifies
  mid-cpu the same way (docs/deviations.md `mid-cpu-normalized`).
- `raw_allocatable`: the formulas take the kubelet's reservation (capacity - allocatable)
  from the raw allocatable when the node's allocatable was amplified, so an amplified
  allocatable above capacity does not erase it (docs/deviations.md `amplified-reservation`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from kube import objects, quantity

ANNOTATION_CPU_NORMALIZATION_RATIO = "node.koordinator.sh/cpu-normalization-ratio"
ANNOTATION_AMPLIFICATION_RATIO = "node.koordinator.sh/resource-amplification-ratio"
ANNOTATION_RAW_ALLOCATABLE = "node.koordinator.sh/raw-allocatable"


def cpu_normalization_ratio(annotations: Mapping[str, str]) -> float | None:
    """The node's CPU normalization ratio when it amplifies (above 1), else None."""
    raw = annotations.get(ANNOTATION_CPU_NORMALIZATION_RATIO)
    if raw is None:
        return None
    try:
        ratio = float(raw)
    except ValueError:
        return None
    return ratio if ratio > 1.0 else None  # NaN compares False: no amplification


def amplify_cpu(millis: int, ratio: float | None) -> int:
    """`millis` times `ratio` (None: unchanged), as Koordinator multiplies the quantity's milli
    value (truncated) and then rounds the quantity up to a whole unit."""
    if ratio is None:
        return millis
    scaled = int(millis * 1000 * ratio)
    return -(-scaled // 1000)


def raw_allocatable(node: objects.Node) -> Mapping[str, int]:
    """The node's allocatable before amplification: `raw-allocatable` over `status.allocatable`
    while an amplification ratio is set, else `status.allocatable`."""
    if not node.annotations.get(ANNOTATION_AMPLIFICATION_RATIO):
        return node.allocatable
    raw = node.annotations.get(ANNOTATION_RAW_ALLOCATABLE)
    if not raw:
        return node.allocatable
    try:
        parsed = json.loads(raw)
        found = quantity.Resources.from_api(parsed if isinstance(parsed, Mapping) else None)
    except ValueError:
        return node.allocatable
    return {**node.allocatable, **found}
