"""Run benchmarks: `python -m bench` runs every bench module, `python -m bench NAME...` some.

A bench module is any public module of this package; its `main()` runs it and
returns 0 when its targets are met. A module with `RUN_BY_DEFAULT = False` (the
15-minute chaos soak) runs only when named. Results go to bench/results/local/
unless `--publish` is given (then to the tracked bench/results/).
`python -m bench NAME --option ...` passes the options to that one module's
`main(argv)`. The exit status is 1 if any target was missed, 2 for an unknown
name or option.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import sys

import bench


def discover() -> list[str]:
    """Names of the bench modules, sorted."""
    return sorted(
        info.name for info in pkgutil.iter_modules(bench.__path__) if not info.name.startswith("_")
    )


USAGE = "usage: python -m bench [--publish] [NAME ...] | [--publish] NAME --option ..."


def main(argv: list[str]) -> int:
    known = discover()
    publish = "--publish" in argv
    argv = [arg for arg in argv if arg != "--publish"]
    if argv and argv[0].startswith("-"):
        print(f"unknown option {argv[0]}; {USAGE}", file=sys.stderr)
        return 2
    if publish:
        os.environ[bench.PUBLISH_ENV] = "1"
    if len(argv) > 1 and argv[1].startswith("-"):  # one module with its own options
        names, options = argv[:1], argv[1:]
    else:
        names, options = argv, []
    unknown = [name for name in names if name not in known]
    if unknown:
        print(f"unknown benchmark {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    names = names or [
        name
        for name in known
        if getattr(importlib.import_module(f"bench.{name}"), "RUN_BY_DEFAULT", True)
    ]
    if (
        options
        and not inspect.signature(importlib.import_module(f"bench.{names[0]}").main).parameters
    ):
        print(f"benchmark {names[0]} takes no options; {USAGE}", file=sys.stderr)
        return 2
    print(f"results go to {bench.results_dir()}", flush=True)
    status = 0
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        print(f"== bench {name}", flush=True)
        if module.main(options) if options else module.main():
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
