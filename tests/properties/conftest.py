"""Hypothesis settings for the property tests: modest, deterministic, no example database.

`derandomize=True` makes every run draw the same examples (CI stays reproducible);
`deadline=None` because a shared 2-core machine makes single-example timings noisy.
Set HYPOTHESIS_PROFILE=thorough to explore more examples locally.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "nodeqos",
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    max_examples=5000,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "nodeqos"))
