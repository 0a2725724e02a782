"""The nodeqos demo (interim): a real local control plane, CRDs, one NodeMetric.

Run with `make demo`. It starts etcd + kube-apiserver, installs the CRDs from
deploy/crds/, registers a Node, creates the node's NodeMetric, writes a status
through the status subresource, prints the object as the server returned it,
and shuts everything down — also on Ctrl-C or SIGTERM.

The end-to-end demo (agents, descheduler, evictions) replaces this once the
agent and descheduler issues land.
"""

from __future__ import annotations

import datetime as dt
import signal
import sys
import time
from types import FrameType

import yaml

from kube import controlplane, localcluster, quantity, rest, slo


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> int:
    signal.signal(signal.SIGTERM, _terminate)
    started = time.monotonic()
    try:
        with controlplane.ControlPlane() as plane:
            print(f"control plane ready at {plane.url} in {time.monotonic() - started:.1f}s")
            client = rest.Rest.from_kubeconfig(plane.kubeconfig)
            localcluster.register_node(client, "demo-node", cpu="4", memory="16Gi")
            path = rest.object_path("slo.koordinator.sh", "v1alpha1", "nodemetrics")
            metric = slo.NodeMetric.for_node("demo-node")
            created = client.create(path, metric.to_api())
            usage = quantity.Resources({"cpu": 1500, "memory": 6 * 1024**3})
            status = slo.NodeMetricStatus(
                update_time=dt.datetime.now(dt.UTC).replace(microsecond=0),
                node_metric=slo.NodeMetricInfo(node_usage=usage, system_usage=usage),
            )
            created["status"] = status.to_api()
            name_path = rest.object_path(
                "slo.koordinator.sh", "v1alpha1", "nodemetrics", "demo-node", subresource="status"
            )
            stored = client.replace(name_path, created)
            stored["metadata"].pop("managedFields", None)
            print(yaml.safe_dump(stored, sort_keys=False))
            print(f"demo done in {time.monotonic() - started:.1f}s; shutting down")
    except KeyboardInterrupt:
        print("interrupted; control plane stopped", file=sys.stderr)
        return 130
    except controlplane.ControlPlaneError as err:
        print(f"demo: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
