"""Rest for pods a PodDisruptionBudget refused: not asked again every cycle.

A 429 from the Eviction API means the budget has no room now; asking again on
the next cycle (typically minutes later, often before the NodeMetric that
triggered it has even been refreshed) only repeats the refusal and its Event.
A refused pod rests for `initial`, doubling on every further refusal up to
`cap` (the delays are `kube.backoff`'s, unjittered: a rest is stated in Events
and decisions, so it is exact); an accepted eviction or a pod that leaves the
snapshot forgets it.
Within the rest the evictor records reason `backoff` without an API call.

Only real runs write this state: a dry run reads it (to decide as a real run
would) but never adds to it, so two dry runs decide the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from kube import backoff


@dataclass(frozen=True, slots=True)
class Rest:
    until: datetime
    delay: timedelta


class PdbBackoff:
    def __init__(
        self, *, initial: timedelta = timedelta(minutes=1), cap: timedelta = timedelta(minutes=10)
    ) -> None:
        self.initial = initial
        self.cap = cap
        self._delays = backoff.ItemExponential(
            backoff.Policy(initial=initial.total_seconds(), cap=cap.total_seconds())
        )
        self._rests: dict[str, Rest] = {}

    def resting_until(self, uid: str, now: datetime) -> datetime | None:
        """When the pod may be tried again, if that is still in the future."""
        rest = self._rests.get(uid)
        return rest.until if rest is not None and rest.until > now else None

    def refused(self, uid: str, now: datetime) -> Rest:
        """Record a refusal: rest `initial`, or twice the previous rest, at most `cap`."""
        delay = timedelta(seconds=self._delays.when(uid))
        rest = self._rests[uid] = Rest(now + delay, delay)
        return rest

    def forget(self, uid: str) -> None:
        self._rests.pop(uid, None)
        self._delays.forget(uid)

    @property
    def resting(self) -> int:
        """How many pods have a rest on record."""
        return len(self._rests)

    def keep_only(self, uids: set[str]) -> None:
        """Drop the state of pods no longer in the cluster (bounded memory)."""
        for uid in [u for u in self._rests if u not in uids]:
            del self._rests[uid]
        self._delays.keep_only(uids)
