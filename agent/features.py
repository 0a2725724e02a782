"""The agent's feature gates: one alphabetical table, parsed from `--feature-gates`.

The table is qosmanager's built-in strategy gates (`qosmanager.features.
BUILTIN_FEATURES`, Koordinator's names and defaults from
pkg/features/koordlet_features.go) plus the gates of the agent's own
collectors, in the same `Feature` type and parsed by the same `FeatureGates`,
so a koordlet DaemonSet's `--feature-gates` value carries over unchanged where
we implement the feature and one flag gates both halves of the agent.

The CLI parses the flag once (`parse`) and hands the value to the parts that
branch on a gate, the QoS manager included; nothing mutates gates globally,
and tests build a fresh value with `features.parse("PSICollector=true")`.
"""

from __future__ import annotations

from qosmanager import features as qfeatures

PSI_COLLECTOR = "PSICollector"

# The collectors' gates; the QoS strategies' gates live with the strategies.
COLLECTOR_FEATURES: tuple[qfeatures.Feature, ...] = (
    qfeatures.Feature(
        PSI_COLLECTOR, False, qfeatures.Stage.ALPHA, "collect pressure stall info per pod"
    ),
)

# The one table `--feature-gates` accepts, alphabetical ignoring case (as --help lists it).
FEATURES: tuple[qfeatures.Feature, ...] = tuple(
    sorted((*qfeatures.BUILTIN_FEATURES, *COLLECTOR_FEATURES), key=lambda f: f.name.lower())
)


def defaults() -> qfeatures.FeatureGates:
    """Every gate at its default."""
    return qfeatures.FeatureGates(FEATURES)


def parse(text: str) -> qfeatures.FeatureGates:
    """Gates from "Name=bool,Name=bool"; ValueError names the problem (and the known gates).

    Blank entries are ignored (a trailing comma is fine); a later entry for the
    same gate wins, as in Kubernetes.
    """
    return qfeatures.FeatureGates.from_flag(FEATURES, text)
