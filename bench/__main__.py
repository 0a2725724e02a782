"""Run benchmarks: `python -m bench` runs every bench module, `python -m bench NAME...` some.

A bench module is any public module of this package; its `main()` runs it and
returns 0 when its targets are met. The exit status is 1 if any target was
missed, 2 for an unknown name. A module with `RUN_BY_DEFAULT = False` (the
15-minute chaos soak) runs only when named. `python -m bench NAME --option ...`
passes the options to that one module's `main(argv)`.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import bench


def discover() -> list[str]:
    """Names of the bench modules, sorted."""
    return sorted(
        info.name for info in pkgutil.iter_modules(bench.__path__) if not info.name.startswith("_")
    )


def main(argv: list[str]) -> int:
    known = discover()
    if len(argv) > 1 and argv[1].startswith("-"):
        if argv[0] not in known:
            print(f"unknown benchmark {argv[0]}; known: {', '.join(known)}", file=sys.stderr)
            return 2
        print(f"== bench {argv[0]}", flush=True)
        return 1 if importlib.import_module(f"bench.{argv[0]}").main(argv[1:]) else 0
    names = argv or [
        name
        for name in known
        if getattr(importlib.import_module(f"bench.{name}"), "RUN_BY_DEFAULT", True)
    ]
    unknown = [name for name in names if name not in known]
    if unknown:
        print(f"unknown benchmark {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    status = 0
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        print(f"== bench {name}", flush=True)
        if module.main():
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
