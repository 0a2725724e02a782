"""helm and the chart in deploy/helm/nodeqos, for tests/deploy and tests/e2e.

helm is built from the pinned module in hack/helm/ by hack/build-helm.sh (cached
under ~/.cache/nodeqos/helm/, about two minutes the first time on two cores),
so a fresh machine needs nothing but Go. A test that cannot get helm fails
saying why; it never skips.
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "deploy" / "helm" / "nodeqos"
BUILD_SCRIPT = REPO / "hack" / "build-helm.sh"
RELEASE = "nodeqos"


@functools.cache
def binary() -> Path:
    """The helm binary, built on first use."""
    done = subprocess.run([str(BUILD_SCRIPT)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"cannot build helm with hack/build-helm.sh:\n{done.stderr}", pytrace=False)
    return Path(done.stdout.strip().splitlines()[-1]) / "helm"


def run(
    *args: str, values: Mapping[str, Any] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """`helm <args>`, with `values` (if any) passed as a values file on stdin.

    helm's own state (repositories, plugins, registry logins) is kept out of the
    user's home: these commands need none of it, and must not read a user's.
    """
    home = binary().parent / "home"
    env = {
        **os.environ,
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    argv = [str(binary()), *args]
    if values is not None:
        argv += ["--values", "-"]
    done = subprocess.run(
        argv,
        input=yaml.safe_dump(dict(values)) if values is not None else None,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"helm {' '.join(args)} exited {done.returncode}:\n{done.stderr}{done.stdout}"
        )
    return done


def template(
    values: Mapping[str, Any] | None = None,
    *,
    namespace: str = "nodeqos-system",
    include_crds: bool = False,
    extra: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The objects `helm template` renders from the chart (in order)."""
    args = ["template", RELEASE, str(CHART), "--namespace", namespace, *extra]
    if include_crds:
        args.append("--include-crds")
    out = run(*args, values=values).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]
