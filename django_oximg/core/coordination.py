"""Render a hot key once across processes, not just once per process.

In-process, :class:`~django_oximg.core.singleflight.SingleFlight` makes
identical concurrent misses share one render. Behind a load balancer the same
URL reaches several processes at once; a :class:`Coordinator` gives one of
them a lease on the key (a lock with a time-to-live), the others wait for the
result to appear in the shared result cache.

A lease that is never released (its holder was killed) expires after its TTL,
so a crash delays the others by at most that long and never blocks them.
"""

from __future__ import annotations

from typing import Protocol


class Coordinator(Protocol):
    """Leases on cache keys, shared by every process that shares a result cache."""

    #: Whether other processes take leases too (then a result may appear in
    #: the shared cache at any time, and is looked for once the lease is held).
    shared: bool

    def acquire(self, key: str, ttl: float) -> bool:
        """Take the lease on ``key`` for ``ttl`` seconds; False if another holds it."""
        ...

    def release(self, key: str) -> None:
        """Give the lease back (after the result is in the cache, or on failure)."""
        ...


class LocalCoordinator:
    """One process only: in-process single-flight already covers it, so always grant."""

    shared = False

    def acquire(self, key: str, ttl: float) -> bool:
        return True

    def release(self, key: str) -> None:
        return None
