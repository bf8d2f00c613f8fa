"""Render a hot key once across processes, not just once per process.

Part of step 4 of a request (the map: :mod:`django_oximg.core.serving`).

In-process, :class:`~django_oximg.core.serving.singleflight.SingleFlight` makes
identical concurrent misses share one render. Behind a load balancer the same
URL reaches several processes at once; a :class:`Coordinator` gives one of
them a lease on the key, and the others wait for the result to appear in the
shared result cache.

A lease lives in a shared cache (Redis, through a Django cache:
:class:`CacheCoordinator`) and says one of three things:

* nothing (:attr:`LeaseState.FREE`): nobody is making the result, or its
  maker failed, or died;
* :attr:`~LeaseState.BUSY`: a process is making it. The holder renews the
  lease every :data:`RENEW_EVERY` seconds while it works, and the lease
  lapses :data:`LEASE_TTL` seconds after the last renewal, so a holder that
  was killed (``kill -9``, a lost machine) delays its peers by a few
  seconds, after which one of them takes the lease and renders;
* :attr:`~LeaseState.DONE`: made and stored, for :data:`DONE_TTL` seconds.
  A process that missed the cache just before the holder stored the result
  learns it from the lease (a free Redis read), not from a second lookup in
  the result cache (a paid S3 request).

A coordination cache that fails or does not answer within ``timeout``
seconds never fails a request: the call is given up on
(:mod:`~django_oximg.core.limits.bounded`), the request renders uncoordinated, as
it would with no coordination at all, and for :data:`BREAKER_PAUSE` seconds
no request asks again, so a frozen Redis costs one request a short wait, not
every request in turn. The failure is reported as a fault
(:mod:`~django_oximg.core.serving.faults`): ``/health`` names it until a call
answers again (each health check tries one).

Pure Python: no Django, no pyvips. The cache is anything with Django's cache
methods ``add``, ``get``, ``set``, ``touch`` and ``delete``.
"""

from __future__ import annotations

import enum
import threading
import time
from typing import Any, Protocol

from django_oximg.core.limits.bounded import BoundedCalls, Breaker
from django_oximg.core.limits.timeouts import FIRST_CALL_ALLOWANCE
from django_oximg.core.serving.faults import COORDINATION_CACHE, Faults

#: Prefix of lease keys in the shared cache.
LEASE_PREFIX = "oximg:lease:"

#: The key a health check reads (it need not exist: any answer will do).
PROBE_KEY = "oximg:probe"

#: Seconds a lease outlives its last renewal: how long a killed holder
#: delays its peers. Whole seconds (Redis' ``EX`` takes no fraction), and
#: several renewals long, so one slow renewal does not lose the lease.
LEASE_TTL = 3

#: Seconds between two renewals of a held lease.
RENEW_EVERY = 1.0

#: Seconds a lease says "done" after the result was stored: far longer than
#: a request takes from its cache miss to asking for the lease.
DONE_TTL = 10

#: Seconds no request asks the coordination cache after a call failed.
BREAKER_PAUSE = 5.0


#: Threads that may wait for the coordination cache at once; when each is
#: held by a call that hangs, the next call fails at once.
CALL_THREADS = 4

_BUSY = "busy"
_DONE = "done"


class LeaseState(enum.Enum):
    """What the lease on a key says."""

    FREE = "free"
    BUSY = "busy"
    DONE = "done"
    #: The coordination cache did not answer: render without a lease.
    UNKNOWN = "unknown"


class Coordinator(Protocol):
    """Leases on cache keys, shared by every process that shares a result cache."""

    #: Whether other processes take leases too.
    shared: bool

    def acquire(self, key: str) -> bool:
        """Take the lease on ``key``: True when this process is to make the result
        (also when the coordination cache cannot say); False while a peer holds it
        or has just stored the result."""
        ...

    def state(self, key: str) -> LeaseState:
        """What the lease on ``key`` says now."""
        ...

    def finish(self, key: str) -> None:
        """The result of a held lease is stored: the lease says so for a while."""
        ...

    def release(self, key: str) -> None:
        """Give a held lease back without a result (the making failed)."""
        ...

    def check(self) -> None:
        """Ask the coordination cache once, for the health check (records the outcome)."""
        ...


class LocalCoordinator:
    """One process only: in-process single-flight already covers it, so always grant."""

    shared = False

    def acquire(self, key: str) -> bool:
        return True

    def state(self, key: str) -> LeaseState:
        return LeaseState.FREE

    def finish(self, key: str) -> None:
        return None

    def release(self, key: str) -> None:
        return None

    def check(self) -> None:
        return None


class LeaseCache(Protocol):
    """What a shared cache must do for leases: Django's cache API, ``SET NX`` atomic."""

    def add(self, key: str, value: Any, timeout: float | None = ...) -> bool: ...

    def get(self, key: str, default: Any = ...) -> Any: ...

    def set(self, key: str, value: Any, timeout: float | None = ...) -> object: ...

    def touch(self, key: str, timeout: float | None = ...) -> bool: ...

    def delete(self, key: str) -> Any: ...


class CacheCoordinator:
    """Leases kept in a shared cache, every call to it bounded in time (thread-safe)."""

    shared = True

    def __init__(
        self,
        cache: LeaseCache,
        *,
        timeout: float,
        faults: Faults | None = None,
        renew_every: float = RENEW_EVERY,
    ) -> None:
        """``timeout``: seconds a call to the cache may take before it is given up on."""
        self.cache = cache
        self.calls = BoundedCalls(
            "coordination", CALL_THREADS, timeout, first_timeout=timeout + FIRST_CALL_ALLOWANCE
        )
        self.breaker = Breaker(BREAKER_PAUSE)
        self.faults = faults or Faults()
        self.keeper = LeaseKeeper(self, renew_every)

    def acquire(self, key: str) -> bool:
        granted = self._call(lambda: self.cache.add(LEASE_PREFIX + key, _BUSY, timeout=LEASE_TTL))
        if granted is None:  # no answer: render here, uncoordinated
            return True
        if granted:
            self.keeper.hold(key)
        return bool(granted)

    def state(self, key: str) -> LeaseState:
        missing = object()
        value = self._call(lambda: self.cache.get(LEASE_PREFIX + key, missing))
        if value is None:
            return LeaseState.UNKNOWN
        if value is missing:
            return LeaseState.FREE
        return LeaseState.DONE if value == _DONE else LeaseState.BUSY

    def finish(self, key: str) -> None:
        self.keeper.drop(key)
        self._call(lambda: _done(self.cache.set(LEASE_PREFIX + key, _DONE, timeout=DONE_TTL)))

    def release(self, key: str) -> None:
        self.keeper.drop(key)
        self._call(lambda: _done(self.cache.delete(LEASE_PREFIX + key)))

    def renew(self, key: str) -> None:
        """Push back a held lease's expiry (the keeper's thread calls this)."""
        self._call(lambda: _done(self.cache.touch(LEASE_PREFIX + key, timeout=LEASE_TTL)))

    def check(self) -> None:
        """One call, even while the breaker is open: a health check sees recovery."""
        self._call(lambda: _done(self.cache.get(PROBE_KEY)), probe=True)

    def _call(self, fn: Any, probe: bool = False) -> Any:
        """``fn()`` within the time bound; None when it failed, timed out or was skipped.

        ``fn`` must not return None itself (hence :func:`_done` above).
        Cache backends raise their own exception types (redis, pymemcache,
        ...), hence the broad catch: any failure means "no coordination now".
        """
        if not probe and not self.breaker.closed():
            return None
        try:
            result = self.calls.call(fn)
        except Exception as error:  # see the docstring: reported, never raised
            self.breaker.opened()
            self.faults.failed(
                COORDINATION_CACHE,
                str(error) or type(error).__name__,
                "coordination cache failed, rendering without a lease",
            )
            return None
        self.breaker.reset()
        self.faults.succeeded(COORDINATION_CACHE)
        return result


def _done(_answer: object) -> bool:
    """True: a call whose answer does not matter, only that it came (see ``_call``)."""
    return True


#: Seconds the keeper's thread waits for a lease to renew before it exits
#: (the next lease starts it again): long enough that a process making a
#: miss every few seconds keeps one thread, short enough that a replaced
#: coordinator (settings changed) leaves none behind for long.
KEEPER_IDLE = 60.0


class LeaseKeeper:
    """One thread that renews the leases its coordinator holds.

    The thread starts with the first lease and exits once no lease has been
    held for :data:`KEEPER_IDLE` seconds; a forked process starts its own.
    """

    def __init__(self, coordinator: CacheCoordinator, renew_every: float) -> None:
        self.coordinator = coordinator
        self.renew_every = renew_every
        self._held: set[str] = set()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def hold(self, key: str) -> None:
        with self._changed:
            self._held.add(key)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="oximg-lease-keeper", daemon=True
                )
                self._thread.start()

    def drop(self, key: str) -> None:
        with self._changed:
            self._held.discard(key)

    def held(self) -> set[str]:
        with self._changed:
            return set(self._held)

    def _run(self) -> None:
        idle_since = time.monotonic()
        while True:
            with self._changed:
                self._changed.wait(self.renew_every)
                if not self._held:
                    if time.monotonic() - idle_since >= KEEPER_IDLE:
                        self._thread = None
                        return
                    continue
                idle_since = time.monotonic()
                keys = list(self._held)
            for key in keys:
                if key in self._held:  # not finished meanwhile
                    self.coordinator.renew(key)
