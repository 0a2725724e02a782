"""Backoff and rate limiting: the one place retry delays are computed.

    policy = backoff.Policy(initial=0.5, cap=30.0, jitter=0.5)
    retry = backoff.Backoff(policy)          # one sequence: informers, restart loops
    stop.wait(retry.delay())                  # 0.25-0.5, 0.5-1, 1-2, ... capped
    retry.reset()                             # after a success

    limiter = backoff.controller_limiter()   # a controller's work queue
    delay = limiter.when("n1")                # "n1" failed: wait this long
    limiter.forget("n1")                      # "n1" succeeded: its count starts over

Callers: `kube.cache` (the informers' relist/rewatch), `kube.controller` (the
work queue's failed keys and the controller-wide outage gate), the descheduler's
controller restarts, PDB rests and migration job retries, qosmanager's plugin
restarts and PDB-refused evictions, and the manager's webhook certificate loop.

The shapes are client-go's (k8s.io/client-go/util/workqueue, default_rate_limiters.go):
a per-item exponential failure limiter, an overall token bucket, and `MaxOf`
taking the longer of their delays, so one object failing backs off on its own
and many objects failing together cannot exceed the bucket's rate. Every clock
and random source is injectable; nothing here sleeps. Thread-safe.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """Delays `initial`, `initial*factor`, ... up to `cap`; `jitter` takes up to that
    fraction off each at random (0: exact, 0.5: the reflector's "between half and all";
    a `rand` of 1.0 gives the full delay)."""

    initial: float
    cap: float
    factor: float = 2.0
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if not (0 < self.initial <= self.cap and self.factor >= 1 and 0 <= self.jitter <= 1):
            raise ValueError(f"need 0 < initial <= cap, factor >= 1, 0 <= jitter <= 1: {self}")

    def base(self, failures: int) -> float:
        """The delay after `failures` (>= 1) failures in a row, before jitter."""
        if failures < 1:
            return 0.0
        # stop multiplying once capped: 2.0 ** 2000 overflows a float
        delay = self.initial
        for _ in range(failures - 1):
            delay *= self.factor
            if delay >= self.cap:
                return self.cap
        return min(delay, self.cap)

    def delay(self, failures: int, rand: Callable[[], float] = random.random) -> float:
        """`base(failures)` with jitter applied."""
        base = self.base(failures)
        return base * (1.0 - self.jitter + self.jitter * rand()) if self.jitter else base


class Backoff:
    """One retry sequence: each `delay()` is the next, `reset()` starts over."""

    def __init__(self, policy: Policy, rand: Callable[[], float] = random.random) -> None:
        self.policy = policy
        self._rand = rand
        self.failures = 0

    @property
    def cap(self) -> float:
        return self.policy.cap

    def delay(self) -> float:
        self.failures += 1
        return self.policy.delay(self.failures, self._rand)

    def reset(self) -> None:
        self.failures = 0


class RateLimiter(Protocol):
    """client-go's workqueue.RateLimiter: how long `key` waits before its retry."""

    def when(self, key: Hashable) -> float: ...

    def forget(self, key: Hashable) -> None: ...

    def failures(self, key: Hashable) -> int: ...


class ItemExponential:
    """Per-key failure counts: a key's n-th failure in a row waits `policy.delay(n)`."""

    def __init__(self, policy: Policy, rand: Callable[[], float] = random.random) -> None:
        self.policy = policy
        self._rand = rand
        self._lock = threading.Lock()
        self._failures: dict[Hashable, int] = {}

    def when(self, key: Hashable) -> float:
        with self._lock:
            count = self._failures[key] = self._failures.get(key, 0) + 1
        return self.policy.delay(count, self._rand)

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._failures.pop(key, None)

    def failures(self, key: Hashable) -> int:
        with self._lock:
            return self._failures.get(key, 0)

    def keep_only(self, keys: Iterable[Hashable]) -> None:
        """Drop the counts of keys not in `keys` (bounded memory)."""
        keep = set(keys)
        with self._lock:
            for key in [k for k in self._failures if k not in keep]:
                del self._failures[key]

    def __len__(self) -> int:
        with self._lock:
            return len(self._failures)


class TokenBucket:
    """`qps` tokens a second, at most `burst` saved: `when` reserves the next token and
    says how long until it is due (golang.org/x/time/rate's Reserve().Delay())."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"need qps > 0 and burst >= 1, got {qps}, {burst}")
        self.qps, self.burst = qps, burst
        self._clock = clock
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._at = clock()

    def when(self, key: Hashable = None) -> float:
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
            self._at = now
            self._tokens -= 1.0  # may go negative: later callers wait behind this one
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def forget(self, key: Hashable) -> None:
        """Tokens are not per key: nothing to forget."""

    def failures(self, key: Hashable) -> int:
        return 0


class MaxOf:
    """The longest delay of several limiters (client-go's MaxOfRateLimiter)."""

    def __init__(self, *limiters: RateLimiter) -> None:
        self.limiters = limiters

    def when(self, key: Hashable) -> float:
        return max(limiter.when(key) for limiter in self.limiters)

    def forget(self, key: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(key)

    def failures(self, key: Hashable) -> int:
        return max(limiter.failures(key) for limiter in self.limiters)


CONTROLLER_ITEM = Policy(initial=0.5, cap=60.0, jitter=0.2)
"""A controller's per-key failure delays: 0.5 s doubling to 60 s, 20% jitter. client-go's
default starts at 5 ms and caps at 1000 s; ours starts where a retry of an API write
can have a different answer and caps at the manager's shortest resync."""
CONTROLLER_QPS, CONTROLLER_BURST = 2.0, 20
"""The overall bucket of a controller's retries (client-go's default: 10 qps, 100 burst)."""


def controller_limiter(
    *,
    item: Policy = CONTROLLER_ITEM,
    qps: float = CONTROLLER_QPS,
    burst: int = CONTROLLER_BURST,
    clock: Callable[[], float] = time.monotonic,
    rand: Callable[[], float] = random.random,
) -> MaxOf:
    """Per-key exponential failure backoff, and at most `qps` retries a second overall."""
    return MaxOf(ItemExponential(item, rand), TokenBucket(qps, burst, clock))
