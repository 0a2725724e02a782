"""Running the extender next to a local control plane: the demo, the e2e tests, the benchmark.

- `command`: the argv of a `nodeqos-scheduler-extender` process;
- `wait_ready`: block until its `/healthz` says the caches have synced;
- `point_scheduler`: a shipped KubeSchedulerConfiguration (deploy/kube-scheduler/)
  with every extender's `urlPrefix` pointed at a local port, everything else as
  shipped, so what the tests run is what users deploy.
"""

from __future__ import annotations

import copy
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml


def command(kubeconfig: Path, config_file: Path | None, port: int) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "extender.cli",
        "--kubeconfig",
        str(kubeconfig),
        "--bind-address",
        f"127.0.0.1:{port}",
    ]
    if config_file is not None:
        argv += ["--config", str(config_file)]
    return argv


def wait_ready(port: int, timeout: float = 60.0) -> dict[str, Any]:
    """The readiness JSON once ready; raises TimeoutError with the last answer otherwise."""
    deadline = time.monotonic() + timeout
    last: object = "no answer"
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as reply:
                body: dict[str, Any] = json.loads(reply.read())
                return body
        except urllib.error.HTTPError as err:
            last = err.read().decode(errors="replace")
        except OSError as err:
            last = err
        time.sleep(0.2)
    raise TimeoutError(f"extender on port {port} not ready after {timeout:.0f}s: {last}")


def point_scheduler(config_file: Path, port: int) -> dict[str, Any]:
    """The KubeSchedulerConfiguration in `config_file`, its extenders at 127.0.0.1:`port`."""
    config: dict[str, Any] = copy.deepcopy(yaml.safe_load(config_file.read_text()))
    extenders = config.get("extenders") or []
    if not extenders:
        raise ValueError(f"{config_file}: no extenders to point at port {port}")
    for extender in extenders:
        extender["urlPrefix"] = f"http://127.0.0.1:{port}"
    config.pop("leaderElection", None)  # the local control plane sets its own
    return config
