"""The descheduler as a program: the daemon, its HTTP endpoint, and `simulate`.

`descheduler.cli` parses the command line and calls in here; nothing else does.

- `daemon`: builds the client, caches, eviction backend and runner from the
  configuration, runs cycles while this replica leads (`leader`), serves
  `/metrics` and `/healthz` (`server`, `health`, `telemetry`);
- `simulate` and `snapshotfile`: one dry-run cycle over a saved cluster
  snapshot, rendered by `render` (table) or as JSON.
"""

from descheduler.app.daemon import Daemon, Options, StartupError, build
from descheduler.app.snapshotfile import SnapshotError

__all__ = ["Daemon", "Options", "SnapshotError", "StartupError", "build"]
