"""Run benchmarks: `python -m bench` runs every bench module, `python -m bench NAME...` some.

A bench module is any public module of this package; its `main()` runs it and
returns 0 when its targets are met. Results go to bench/results/local/ unless
`--publish` is given (then to the tracked bench/results/). The exit status is 1
if any target was missed, 2 for an unknown name or option.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys

import bench


def discover() -> list[str]:
    """Names of the bench modules, sorted."""
    return sorted(
        info.name for info in pkgutil.iter_modules(bench.__path__) if not info.name.startswith("_")
    )


USAGE = "usage: python -m bench [--publish] [NAME ...]"


def main(argv: list[str]) -> int:
    known = discover()
    options = [arg for arg in argv if arg.startswith("-")]
    bad = [arg for arg in options if arg != "--publish"]
    if bad:
        print(f"unknown option {', '.join(bad)}; {USAGE}", file=sys.stderr)
        return 2
    names = [arg for arg in argv if not arg.startswith("-")] or known
    unknown = [name for name in names if name not in known]
    if unknown:
        print(f"unknown benchmark {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    if options:
        os.environ[bench.PUBLISH_ENV] = "1"
    print(f"results go to {bench.results_dir()}", flush=True)
    status = 0
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        print(f"== bench {name}", flush=True)
        if module.main():
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
