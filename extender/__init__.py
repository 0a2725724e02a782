"""nodeqos load-aware scheduling, served to kube-scheduler as a scheduler extender.

Koordinator's koord-scheduler LoadAwareScheduling plugin, rebuilt for the engine
users already run: kube-scheduler calls this HTTP server's `filter` and
`prioritize` verbs (`k8s.io/kube-scheduler/extender/v1`) with the pod and the
candidate node names; answers come from list-watch caches of Nodes, Pods and
NodeMetrics, so measured usage, not requests, decides where a pod lands.

It is a small scheduling framework (`extender.framework`): the verbs are
answered by the filter and score plugins a profile enables, found through the
entry-point group `nodeqos.scheduler.plugins`; LoadAwareScheduling
(`extender.plugins.loadaware`) is the in-tree one (docs/scheduler-plugins.md).

Layering: may import `kube` only (a sibling of `descheduler`), plus the stdlib,
prometheus-client, click and pyyaml.

- `framework`: the plugin Protocols, registry, profile config and runner.
- `plugins`: the in-tree plugins (`IN_TREE`) and `registry()`.

- `args`: `LoadAwareArgs`, Koordinator's LoadAwareSchedulingArgs with its names
  and defaults; `load_args` reports every bad field with its path.
- `view`: `ClusterView`, the per-node load the verbs read (the estimator lives here).
- `protocol`: the extender wire types, decoded and encoded.
- `server`: the HTTP server (`/filter`, `/prioritize`, `/metrics`, `/healthz`).
- `cli`: the `nodeqos-scheduler-extender` command.
"""

from extender.args import ArgsError, LoadAwareArgs, load_args
from extender.view import ClusterView

__all__ = ["ArgsError", "ClusterView", "LoadAwareArgs", "load_args"]
