"""The extender's server-CPU comparison: two trees' extenders, pod by pod, in one process.

`python -m bench._extcpu CASE.json TREE...` loads each TREE's `extender` and
`kube` packages under their own names in turn (importing one tree, then taking
its modules out of `sys.modules` before the next: the functions keep their own
module globals, so both trees run side by side), builds a view of the same
synthetic cluster with each, and sends every pod of the case to each tree's
`extender.server.routes` in turn, the order alternating pod by pod. A burst of
someone else's work on a shared machine then lands on both trees alike, which
separate processes minutes apart cannot promise (2026-11-26, load average 6 to
10: the same arm's median moved 1.1 to 2.7 ms between processes).

The parent (`bench._fwcost`) writes the case (the cluster as raw API objects and
the request bodies) and reads one JSON line back: per tree, the thread CPU time
of each pod's filter + prioritize. Nothing of ours is imported here at module
level, so what is measured is each tree's own code.

Both trees' routes are driven the same way: pre-framework
`routes(view, Telemetry(registry, view))`, the framework's
`routes(as_framework(view, registry), Telemetry(registry))` (LoadAwareScheduling
alone, as the shipped configuration runs it).

`--profile PREFIX` also writes a cProfile per tree, PREFIX-<index>.prof.
"""

from __future__ import annotations

import cProfile
import gc
import importlib
import json
import sys
import time
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

PACKAGES = ("extender", "kube")


def _ours(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in PACKAGES)


def load(tree: str) -> dict[str, ModuleType]:
    """`tree`'s extender (server, view, args), imported from `tree` alone, then taken
    out of `sys.modules` so the next tree imports its own."""
    for name in [n for n in sys.modules if _ours(n)]:
        del sys.modules[name]
    sys.path.insert(0, tree)
    try:
        modules = {
            name: importlib.import_module(f"extender.{name}") for name in ("server", "view", "args")
        }
        modules["package"] = sys.modules["extender"]
    finally:
        sys.path.remove(tree)
        for name in [n for n in sys.modules if _ours(n)]:
            del sys.modules[name]
    return modules


def _view(modules: dict[str, ModuleType], objects: list[dict[str, Any]]) -> Any:
    view = modules["view"].ClusterView(modules["args"].decode_args({}))
    # Stamped now, not when the parent wrote the case: NodeMetrics must be fresh.
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for obj in objects:
        kind = obj["kind"]
        if kind == "Node":
            view.on_node("ADDED", None, view.project_node(obj))
        elif kind == "Pod":
            view.on_pod("ADDED", None, view.project_pod(obj))
        else:
            obj["status"]["updateTime"] = now
            view.on_metric("ADDED", None, view.project_metric(obj))
    return view


def _routes(modules: dict[str, ModuleType], view: Any) -> tuple[Any, Any]:
    server = modules["server"]
    registry = server.CollectorRegistry()
    if hasattr(server, "as_framework"):  # the framework
        routes = server.routes(server.as_framework(view, registry), server.Telemetry(registry))
    else:  # pre-framework: the view served directly
        routes = server.routes(view, server.Telemetry(registry, view))
    return routes["/filter"], routes["/prioritize"]


def run(case: dict[str, Any], trees: list[str], profile: str | None = None) -> dict[str, Any]:
    arms = []
    for tree in trees:
        modules = load(tree)
        view = _view(modules, case["objects"])
        view.node_usage(case["first"])  # compute every node once, as the first verb would
        arms.append((modules["package"].__file__, *_routes(modules, view)))
    bodies = [body.encode() for body in case["bodies"]]
    warm_up = case["warm_up"]
    del case
    gc.collect()
    gc.freeze()  # the 30,000-pod views are not what is measured: keep them out of the collector
    profilers = [cProfile.Profile() if profile else None for _ in arms]
    timings: list[list[float]] = [[] for _ in arms]
    for i, body in enumerate(bodies):
        order = range(len(arms)) if i % 2 == 0 else range(len(arms) - 1, -1, -1)
        for arm in order:
            _, filter_, prioritize = arms[arm]
            profiler = profilers[arm] if i >= warm_up else None
            if profiler is not None:
                profiler.enable()
            start = time.thread_time()
            assert filter_(body)[0] == 200 and prioritize(body)[0] == 200
            elapsed = time.thread_time() - start
            if profiler is not None:
                profiler.disable()
            if i >= warm_up:
                timings[arm].append(elapsed)
    for index, profiler in enumerate(profilers):
        if profiler is not None:
            profiler.dump_stats(f"{profile}-{index}.prof")
    return {"trees": [arm[0] for arm in arms], "timings": timings}


def main(argv: list[str]) -> int:
    profile = None
    if "--profile" in argv:
        at = argv.index("--profile")
        profile = argv[at + 1]
        argv = argv[:at] + argv[at + 2 :]
    path, trees = argv[0], argv[1:]
    with open(path) as f:
        case = json.load(f)
    print(json.dumps(run(case, trees, profile)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
