"""A job's content: from the cache, from an identical request in flight, from a peer, or made once.

The cache is looked up first. On a miss, identical concurrent requests in
this process share one flight (:class:`~django_oximg.core.singleflight.SingleFlight`);
its leader takes a place in the executor (a 429 at once when there is
none) before it reads anything, then a lease on the key, so that processes
sharing the cache make it once (:mod:`~django_oximg.core.coordination`):
while a peer holds the lease, the cache is polled for its result, and a
holder that never answers is given up on after ``peer_wait``. The one that
holds the lease makes the answer (:class:`~django_oximg.core.making.Maker`).
The flight shares only the content: each request builds its own result
from it (:meth:`~django_oximg.core.jobs.Job.result`).
"""

from __future__ import annotations

import logging
import threading
import time

from django_oximg.core import metrics, responders
from django_oximg.core.coordination import Coordinator
from django_oximg.core.executor import Admission, Executor
from django_oximg.core.jobs import Job
from django_oximg.core.making import Maker
from django_oximg.core.singleflight import SingleFlight
from django_oximg.core.stores import CachedResult, CacheStore

logger = logging.getLogger("django_oximg")

#: Polling a shared result cache for a peer's render: first pause and cap (s).
PEER_POLL_FIRST = 0.02
PEER_POLL_MAX = 0.25

#: A lease outlives the longest wait by this much, so a holder that was killed
#: blocks its peers for a bounded time only.
LEASE_MARGIN = 5.0


class Lookup:
    """Finds or makes the content of one thumbnailer's jobs (thread-safe)."""

    def __init__(
        self,
        cache: CacheStore,
        executor: Executor,
        flights: SingleFlight,
        coordinator: Coordinator,
        maker: Maker,
        peer_wait: float,
        recorder: metrics.Recorder,
    ) -> None:
        """``peer_wait``: how long a request waits for a peer process's render of its key."""
        self.cache = cache
        self.executor = executor
        self.flights = flights
        self.coordinator = coordinator
        self.maker = maker
        self.peer_wait = peer_wait
        self.metrics = recorder
        #: Answers read from the cache after waiting for a peer's lease.
        self.peer_results = 0
        self._lock = threading.Lock()

    def result_for(self, job: Job, look: bool = True) -> responders.Result:
        """The cached answer, or a fresh one made once for concurrent identical requests.

        ``look=False`` skips the first lookup (the caller found the file
        gone). The request that makes it is admitted first (a place among
        ``WORKERS + QUEUE_SIZE``, or a 429 at once), before it reads
        anything; requests that wait for an identical one take no place of
        their own.
        """
        made_before = self.maker.made
        cached = self.cache.get(job.key) if look else None
        if look:
            self.metrics.count_cache_lookup(hit=cached is not None)
        if cached is not None:
            return job.result(cached)
        content, _shared = self.flights.do(job.key, lambda: self.admitted(job, made_before))
        return job.result(content)

    def admitted(self, job: Job, made_before: int) -> CachedResult:
        """The flight's leader: take a place in the executor, then the lease."""
        with self.executor.admit() as admission:
            return self.cached_or_made(job, made_before, admission)

    def cached_or_made(self, job: Job, made_before: int, admission: Admission) -> CachedResult:
        """Run once per key in flight: make the answer, unless it appeared meanwhile.

        The cache is looked at again, once the lease is held, only when it
        may have changed since the caller's miss: when this process made an
        answer in between (a flight that ended just before this one
        started), or when other processes share the cache (a peer may have
        stored it and released its lease in between). While a peer holds the
        lease, the cache is polled for its result. Followers share what this
        returns, so a remote store's stream is read into memory first.
        """
        lease_ttl = self.peer_wait + LEASE_MARGIN
        give_up = time.monotonic() + self.peer_wait
        pause = PEER_POLL_FIRST
        look = self.maker.made != made_before or self.coordinator.shared
        while True:
            if self.coordinator.acquire(job.key, lease_ttl):
                try:
                    cached = self.cache.get(job.key) if look else None
                    if cached is not None:
                        return cached.in_memory()
                    return self.maker.make(job, admission)
                finally:
                    self.coordinator.release(job.key)
            # Another process holds the lease: its result will be in the cache.
            if time.monotonic() >= give_up:
                # The holder is stuck or was killed: make it here rather than fail.
                logger.warning("no result from the lease holder of %s; making it here", job.key)
                return self.maker.make(job, admission)
            time.sleep(pause)
            pause = min(pause * 2, PEER_POLL_MAX)
            cached = self.cache.get(job.key)
            if cached is not None:
                with self._lock:
                    self.peer_results += 1
                return cached.in_memory()
            look = True  # the peer may finish between this look and our lease
