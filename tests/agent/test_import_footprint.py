"""What the agent holds in memory from imports alone (the RSS benchmark's causes)."""

from __future__ import annotations

import json
import subprocess
import sys


def _modules_after(statement: str) -> set[str]:
    code = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {name.split(".")[0] for name in json.loads(out.stdout)}


def test_standalone_agent_does_not_import_the_kubernetes_package() -> None:
    """kubernetes (~19 MiB), urllib3 and yaml load only when credentials or a YAML print need them."""
    loaded = _modules_after("from agent import cli, standalone")
    assert not {"kubernetes", "urllib3", "yaml"} & loaded


def test_building_a_client_loads_the_kubernetes_package() -> None:
    """The lazy import still happens when credentials are loaded (the guard above is not vacuous)."""
    loaded = _modules_after(
        "from kube import rest\nimport contextlib\n"
        "with contextlib.suppress(Exception): rest.api_client('/nonexistent')"
    )
    assert {"kubernetes", "urllib3"} <= loaded
