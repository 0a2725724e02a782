"""One arm of the extender's server-CPU comparison, run in a process of its own.

`python -m bench._extcpu CASE.json` with PYTHONPATH naming the tree whose
`extender` and `kube` packages are measured first: the pre-framework tree
(commit 6b202d9, exported by `bench.extender.pre_framework_tree`) or this one.
It imports nothing of ours but those two packages and the standard library, so
the arm measures exactly that tree's code; the parent (`bench.extender`) writes
the case (the synthetic cluster as raw API objects and the request bodies) and
reads one JSON line back: the thread CPU time of each pod's filter + prioritize.

Both trees' `extender.server.routes` are driven the same way: pre-framework
`routes(view, Telemetry(registry, view))`, the framework's
`routes(as_framework(view, registry), Telemetry(registry))` (LoadAwareScheduling
alone, as the shipped configuration runs it).

`--profile PATH` also writes a cProfile of the timed calls to PATH.
"""

from __future__ import annotations

import cProfile
import gc
import json
import sys
import time
from datetime import UTC, datetime
from typing import Any


def _view(objects: list[dict[str, Any]]) -> Any:
    from extender import args as argsmod
    from extender.view import ClusterView

    view = ClusterView(argsmod.decode_args({}))
    # Stamped now, not when the parent wrote the case: an arm that starts minutes
    # later must not see expired NodeMetrics.
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


def _routes(view: Any) -> tuple[Any, Any]:
    from extender import server

    registry = server.CollectorRegistry()
    if hasattr(server, "as_framework"):  # the framework
        routes = server.routes(server.as_framework(view, registry), server.Telemetry(registry))
    else:  # pre-framework: the view served directly
        routes = server.routes(view, server.Telemetry(registry, view))
    return routes["/filter"], routes["/prioritize"]


def run(case: dict[str, Any], profile: str | None = None) -> dict[str, Any]:
    view = _view(case["objects"])
    view.node_usage(case["first"])  # compute every node once, as the first verb would
    filter_, prioritize = _routes(view)
    bodies = [body.encode() for body in case["bodies"]]
    warm_up = case["warm_up"]
    del case
    gc.collect()
    gc.freeze()  # the 30,000-pod view is not what is measured: keep it out of the collector
    profiler = cProfile.Profile() if profile else None
    timings = []
    for i, body in enumerate(bodies):
        if profiler is not None and i == warm_up:
            profiler.enable()
        start = time.thread_time()
        assert filter_(body)[0] == 200 and prioritize(body)[0] == 200
        elapsed = time.thread_time() - start
        if i >= warm_up:
            timings.append(elapsed)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)  # type: ignore[arg-type]
    import extender

    return {"tree": extender.__file__, "timings": timings}


def main(argv: list[str]) -> int:
    path, options = argv[0], argv[1:]
    profile = options[options.index("--profile") + 1] if "--profile" in options else None
    with open(path) as f:
        case = json.load(f)
    print(json.dumps(run(case, profile)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
