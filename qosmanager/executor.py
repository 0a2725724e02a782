"""The resource executor: the only writer of cgroup and sysctl files in the agent.

Every QoS strategy changes the host through one `ResourceExecutor`, which adds
to the low-level `cgroups.write` (read-before-write, v1/v2 file and unit mapping):

- a last-value cache: a value the executor wrote, or found, less than
  `force_rewrite_seconds` ago is not even read again; after that the file is
  re-read and rewritten if someone changed it (kubelet resets pod cgroups on
  restarts and resizes, so drift is real);
- leveled writes for hierarchical values (`update_leveled`): every level above
  the deepest is first loosened top-down (quota/limits to max(current, target),
  cpusets to the union), then every level is set exactly bottom-up. Cgroup v1
  refuses a child quota above its parent's (kernel `tg_cfs_schedulable_down`)
  and a cpuset outside its parent's, so raising a container's quota needs the
  pod loosened first, and shrinking needs the children shrunk first
  (Koordinator's `LeveledUpdateBatch` does the same);
- a write the kernel answers by changing another file forgets that file's
  cached value: `cpu.idle` resets the group's shares (`sched_group_set_idle`);
- one owner per file per reconcile tick: the first strategy to claim a file in a
  tick (``floor(clock() / tick_seconds)``) owns it until the tick ends; another
  strategy claiming it in the same tick gets `ClaimRefused`, counted in
  `nodeqos_agent_resource_update_conflicts_total`. A leveled batch claims all its
  files before touching any, so a refused batch changes nothing.

Errors are the cgroups package's: `CgroupGone` (a pod went away; its cache
entries are dropped), `Unsupported`, `AccessDenied`, `WriteRejected`.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import cgroups
from qosmanager import metrics as qmetrics

log = logging.getLogger(__name__)

Clock = Callable[[], float]
Writer = Callable[[cgroups.CgroupFS, cgroups.RelDir, cgroups.Resource, cgroups.ResourceValue], bool]
Reader = Callable[[cgroups.CgroupFS, cgroups.RelDir, cgroups.Resource], cgroups.ResourceValue]
Level = Sequence[tuple[cgroups.RelDir, cgroups.ResourceValue]]

SYSCTL = "sysctl"  # the `resource` label of sysctl writes

# Values where None means "no limit" and a larger value is looser.
_UPPER_BOUNDS = frozenset(
    {
        cgroups.Resource.CPU_QUOTA,
        cgroups.Resource.MEMORY_LIMIT,
        cgroups.Resource.MEMORY_HIGH,
        cgroups.Resource.MEMORY_MIN,
        cgroups.Resource.MEMORY_LOW,
    }
)


class ClaimRefused(Exception):
    """Another strategy owns the file in this reconcile tick."""

    def __init__(self, target: str, owner: str, holder: str) -> None:
        super().__init__(f"{owner} may not write {target}: owned by {holder} in this tick")
        self.target = target
        self.owner = owner
        self.holder = holder


def loosen(
    resource: cgroups.Resource, current: cgroups.ResourceValue, target: cgroups.ResourceValue
) -> cgroups.ResourceValue:
    """The value that admits both `current` and `target` below it in the hierarchy."""
    if resource is cgroups.Resource.CPUSET_CPUS:
        assert isinstance(current, frozenset) and isinstance(target, frozenset)
        return current | target
    if resource in _UPPER_BOUNDS:
        if current is None or target is None:
            return None
        assert isinstance(current, int) and isinstance(target, int)
        return max(current, target)
    return current  # no hierarchical constraint: nothing to loosen


@dataclass(frozen=True, slots=True)
class _Key:
    path: str  # relative cgroup dir, or the sysctl name
    resource: str  # Resource.value, or SYSCTL

    def __str__(self) -> str:
        return f"{self.path} ({self.resource})"


@dataclass(frozen=True, slots=True)
class _Entry:
    value: cgroups.ResourceValue
    at: float


def _key(rel_dir: cgroups.RelDir, resource: cgroups.Resource) -> _Key:
    # A PurePosixPath caches its str(); re-wrapping it would parse it again on every
    # call, the most of a steady round's cost at 250 pods (bench batchresource).
    path = rel_dir if isinstance(rel_dir, PurePosixPath) else PurePosixPath(rel_dir)
    return _Key(str(path), resource.value)


class ResourceExecutor:
    """Writes cgroup values for the strategies; thread-safe (one lock, short writes)."""

    def __init__(
        self,
        fs: cgroups.CgroupFS,
        *,
        metrics: qmetrics.QoSMetrics,
        clock: Clock = time.time,
        sysctl_root: Path | None = None,
        tick_seconds: float = 1.0,
        force_rewrite_seconds: float = 60.0,
        timer: Clock = time.perf_counter,
        writer: Writer = cgroups.write,
        reader: Reader = cgroups.read_resource,
    ) -> None:
        if not tick_seconds > 0:
            raise ValueError(f"tick_seconds must be > 0, got {tick_seconds}")
        self.fs = fs
        self.sysctl_root = sysctl_root
        self._metrics = metrics
        self._clock = clock
        self._tick_seconds = tick_seconds
        self._force_rewrite = force_rewrite_seconds
        self._timer = timer
        self._writer = writer
        self._reader = reader
        self._lock = threading.RLock()
        self._cache: dict[_Key, _Entry] = {}
        self._claims: dict[_Key, str] = {}
        self._claims_tick = -1
        self._last_prune = clock()

    # -- ownership and cache ---------------------------------------------------
    def _claim(self, owner: str, keys: Iterable[_Key]) -> None:
        now = self._clock()
        tick = math.floor(now / self._tick_seconds)
        if tick != self._claims_tick:
            self._claims.clear()  # every claim ends with its tick
            self._claims_tick = tick
        if now - self._last_prune >= self._force_rewrite:
            self._prune(now)
        keys = list(keys)
        for key in keys:
            holder = self._claims.get(key)
            if holder is not None and holder != owner:
                self._metrics.resource_update_conflicts.labels(owner, key.resource).inc()
                raise ClaimRefused(str(key), owner, holder)
        for key in keys:
            self._claims[key] = owner

    def _prune(self, now: float) -> None:
        """Forget values not rewritten for two force periods: their cgroups are gone."""
        self._last_prune = now
        horizon = now - 2 * self._force_rewrite
        for key in [k for k, e in self._cache.items() if e.at < horizon]:
            del self._cache[key]

    def _fresh(self, key: _Key, value: cgroups.ResourceValue) -> bool:
        entry = self._cache.get(key)
        return (
            entry is not None
            and entry.value == value
            and self._clock() - entry.at < self._force_rewrite
        )

    def _drop_under(self, rel_dir: cgroups.RelDir) -> None:
        prefix = str(PurePosixPath(rel_dir))
        for key in [k for k in self._cache if k.path == prefix or k.path.startswith(prefix + "/")]:
            del self._cache[key]

    def forget(self, rel_dir: cgroups.RelDir) -> None:
        """Drop cached values of a cgroup and its children (a pod that went away)."""
        with self._lock:
            self._drop_under(rel_dir)

    # -- cgroups -----------------------------------------------------------------
    def current(self, rel_dir: cgroups.RelDir, resource: cgroups.Resource) -> cgroups.ResourceValue:
        """The value of `resource` at `rel_dir`, as the executor knows it.

        Its own value when it wrote or read the file less than the force-rewrite
        period ago (so a strategy sees another's write at once, without a read),
        else read from the file and remembered. Reading claims nothing. Raises
        the errors of `cgroups.read_resource` (`Unsupported`, `CgroupGone`, ...).
        """
        key = _key(rel_dir, resource)
        with self._lock:
            entry = self._cache.get(key)
            if entry is not None and self._clock() - entry.at < self._force_rewrite:
                return entry.value
            try:
                value = self._reader(self.fs, rel_dir, resource)
            except cgroups.CgroupGone:
                self._drop_under(rel_dir)
                raise
            self._cache[key] = _Entry(value, self._clock())
            return value

    def _write(
        self, rel_dir: cgroups.RelDir, resource: cgroups.Resource, value: cgroups.ResourceValue
    ) -> bool:
        key = _key(rel_dir, resource)
        started = self._timer()
        try:
            changed = self._writer(self.fs, rel_dir, resource, value)
        except cgroups.CgroupGone:
            self._drop_under(rel_dir)
            raise
        except Exception:
            self._cache.pop(key, None)
            raise
        finally:
            elapsed = self._timer() - started
            self._metrics.resource_update_duration.labels(resource.value).observe(elapsed)
        if changed:
            self._metrics.resource_updates.labels(resource.value).inc()
            log.debug("set %s of %s to %r", resource.name, rel_dir, value)
            if resource is cgroups.Resource.CPU_IDLE:
                # the kernel sets an idle group's shares to its minimum and a group
                # leaving idle to 1024 (sched_group_set_idle): the cached value is stale
                self._cache.pop(_key(rel_dir, cgroups.Resource.CPU_SHARES), None)
        self._cache[key] = _Entry(value, self._clock())
        return changed

    def update(
        self,
        owner: str,
        rel_dir: cgroups.RelDir,
        resource: cgroups.Resource,
        value: cgroups.ResourceValue,
    ) -> bool:
        """Set one value as `owner`; True if the file changed.

        Raises `ClaimRefused`, or the cgroups errors of `cgroups.write`.
        """
        key = _key(rel_dir, resource)
        with self._lock:
            self._claim(owner, [key])
            if self._fresh(key, value):
                return False
            return self._write(rel_dir, resource, value)

    def update_leveled(
        self, owner: str, resource: cgroups.Resource, levels: Sequence[Level]
    ) -> int:
        """Set hierarchical values, `levels` ordered top-down; returns files changed.

        Every level but the last is loosened top-down first, then all are set
        exactly bottom-up. A cgroup that vanished meanwhile is skipped; other
        errors abort the batch (the next tick retries it).
        """
        targets = [(rel_dir, value) for level in levels for rel_dir, value in level]
        with self._lock:
            self._claim(owner, (_key(d, resource) for d, _ in targets))
            if all(self._fresh(_key(d, resource), v) for d, v in targets):
                return 0
            changed = 0
            for level in levels[:-1]:
                for rel_dir, value in level:
                    changed += self._loosen_one(rel_dir, resource, value)
            for level in reversed(levels):
                for rel_dir, value in level:
                    if self._fresh(_key(rel_dir, resource), value):
                        continue
                    try:
                        changed += self._write(rel_dir, resource, value)
                    except cgroups.CgroupGone:
                        log.debug("%s vanished during a leveled write; skipped", rel_dir)
            return changed

    def _loosen_one(
        self, rel_dir: cgroups.RelDir, resource: cgroups.Resource, value: cgroups.ResourceValue
    ) -> int:
        if self._fresh(_key(rel_dir, resource), value):
            return 0
        try:
            current = self._reader(self.fs, rel_dir, resource)
            loose = loosen(resource, current, value)
            return int(loose != current and self._write(rel_dir, resource, loose))
        except cgroups.CgroupGone:
            log.debug("%s vanished before loosening; skipped", rel_dir)
            return 0

    # -- sysctl --------------------------------------------------------------------
    def update_sysctl(self, owner: str, name: str, value: int) -> bool:
        """Set ``<sysctl_root>/<name>`` (e.g. "vm/min_free_kbytes") as `owner`.

        Read-before-write and cached like cgroup files. Raises `ClaimRefused`,
        `cgroups.Unsupported` (no such file), `cgroups.AccessDenied`,
        `cgroups.WriteRejected`.
        """
        if self.sysctl_root is None:
            raise cgroups.Unsupported("the executor was built without a sysctl root")
        key = _Key(name, SYSCTL)
        path = self.sysctl_root / name
        with self._lock:
            self._claim(owner, [key])
            if self._fresh(key, value):
                return False
            started = self._timer()
            try:
                changed = _write_sysctl(path, value)
            finally:
                self._metrics.resource_update_duration.labels(SYSCTL).observe(
                    self._timer() - started
                )
            if changed:
                self._metrics.resource_updates.labels(SYSCTL).inc()
            self._cache[key] = _Entry(value, self._clock())
            return changed


def _write_sysctl(path: Path, value: int) -> bool:
    """Read-before-write of one integer sysctl; never creates the file."""
    text = str(value)
    try:
        if path.read_text(encoding="ascii").strip() == text:
            return False
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, text.encode("ascii"))
        finally:
            os.close(fd)
    except FileNotFoundError as err:
        raise cgroups.Unsupported(f"{path}: no such sysctl on this host") from err
    except PermissionError as err:
        raise cgroups.AccessDenied(path) from err
    except OSError as err:
        raise cgroups.WriteRejected(path, text, err) from err
    return True
