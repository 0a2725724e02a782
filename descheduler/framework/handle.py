"""The Handle: the few collaborators a plugin gets. Plugins never build clients.

One Handle per profile, frozen, built by the runner before the profile's
plugins (every factory receives it):

- `evictor`: the profile's evictor proxy (filters, limits, dry-run, backend);
- `decisions`: where a plugin records why it passed a candidate over;
- `clock`: now, as an aware UTC datetime (tests inject a fixed one);
- `snapshot`: the running cycle's snapshot, for plugins that are asked about a
  single pod (filters) and need the cluster around it; it raises between cycles;
- `profile`: the profile's name (for log lines);
- `dry_run`: whether evictions are only pretended this run; plugins with state
  that outlives a cycle (cool-downs) must not let a pretended eviction change it;
- `client`: the API client, for plugins that keep objects of their own in the
  cluster (MigrationController's PodMigrationJobs); None offline (`simulate`,
  the daemon's start-up check build), where such a plugin must still build;
- `recorder`: the Event recorder the eviction backends use, or None;
- `sources`: the actual-usage readers the policy's `metricsProviders`
  configure (metrics-server, Prometheus), for LowNodeUtilization /
  HighNodeUtilization `metricsUtilization`; empty offline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from descheduler import usagesources
from descheduler.framework.cycle import Decisions
from descheduler.framework.interfaces import Clock, Evictor
from descheduler.framework.snapshot import Snapshot
from descheduler.usagesources import Sources
from kube import events, rest


@dataclass(frozen=True, slots=True, kw_only=True)
class Handle:
    evictor: Evictor
    decisions: Decisions
    clock: Clock
    snapshot: Callable[[], Snapshot]
    profile: str = ""
    dry_run: bool = False
    client: rest.Rest | None = None
    recorder: events.Recorder | None = None
    sources: Sources = usagesources.NONE
