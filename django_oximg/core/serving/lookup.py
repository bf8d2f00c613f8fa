"""A job's content: from the cache, from an identical request in flight, from a peer, or made once.

Step 4 of a request (the map: :mod:`django_oximg.core.serving`).

The cache is looked up first; a lookup that fails (a remote cache that does
not answer) is a miss, and reported as a fault (:mod:`~django_oximg.core.serving.faults`).
On a miss, identical concurrent requests in this process share one flight
(:class:`~django_oximg.core.serving.singleflight.SingleFlight`); its leader takes a
place in the executor (a 429 at once when there is none) before it reads
anything, then a lease on the key, so that processes sharing the cache make
it once (:mod:`~django_oximg.core.serving.coordination`). While a peer holds the
lease, the lease itself is watched (a Redis read, not a paid lookup in an S3
cache): once it says the result is stored, the cache is read once; once it
lapses (its holder failed, or was killed), this process takes it and makes
the result. A holder that keeps its lease past ``peer_wait`` is given up on,
and the result made here too. Time spent waiting for a peer does not count
against the queue timeout: the request's admission starts afresh after it.
The one that holds the lease makes the answer
(:class:`~django_oximg.core.serving.making.Maker`). The flight shares only the
content: each request builds its own result from it
(:meth:`~django_oximg.core.serving.jobs.Job.result`).
"""

from __future__ import annotations

import logging
import threading
import time

from django_oximg.core import keys
from django_oximg.core.limits.executor import Admission, Executor
from django_oximg.core.limits.timeouts import PEER_POLL_FIRST, PEER_POLL_MAX
from django_oximg.core.serving import metrics, replies
from django_oximg.core.serving.coordination import Coordinator, LeaseState
from django_oximg.core.serving.faults import RESULT_CACHE_LOOKUP, Faults
from django_oximg.core.serving.jobs import Job
from django_oximg.core.serving.making import Maker
from django_oximg.core.serving.singleflight import SingleFlight
from django_oximg.core.stores.protocols import CachedResult, CacheStore

logger = logging.getLogger("django_oximg")


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
        faults: Faults | None = None,
    ) -> None:
        """``peer_wait``: how long a request waits for a peer process's render of its key."""
        self.cache = cache
        self.executor = executor
        self.flights = flights
        self.coordinator = coordinator
        self.maker = maker
        self.peer_wait = peer_wait
        self.metrics = recorder
        self.faults = faults or Faults()
        #: Answers read from the cache after waiting for a peer's lease.
        self.peer_results = 0
        self._lock = threading.Lock()

    def result_for(self, job: Job, look: bool = True) -> replies.Result:
        """The cached answer, or a fresh one made once for concurrent identical requests.

        ``look=False`` skips the first lookup (the caller found the file
        gone). The request that makes it is admitted first (a place among
        ``WORKERS + QUEUE_SIZE``, or a 429 at once), before it reads
        anything; requests that wait for an identical one take no place of
        their own.
        """
        made_before = self.maker.made
        cached = self.looked_up(job) if look else None
        if look:
            self.metrics.count_cache_lookup(hit=cached is not None)
        if cached is not None:
            return job.result(cached)
        content, _shared = self.flights.do(job.key, lambda: self.admitted(job, made_before))
        return job.result(content)

    def looked_up(self, job: Job) -> CachedResult | None:
        """``cache.get(key)``; a lookup that fails is a miss (reported, logged once a minute).

        A result found for a job whose quality may be searched
        (:attr:`Job.searched <django_oximg.core.serving.jobs.Job.searched>`)
        comes with the quality its sidecar holds (:meth:`stored_quality`);
        every other lookup is the one ``get``.
        """
        key = job.key
        try:
            found = self.cache.get(key)
        except OSError as error:
            log = f"result cache lookup failed for {key}"
            self.faults.failed(RESULT_CACHE_LOOKUP, str(error), log, logging.ERROR)
            return None
        self.faults.succeeded(RESULT_CACHE_LOOKUP)
        if found is not None and job.searched and found.url is None:
            # A redirect (CACHE_REDIRECT) sends no image, so no header either.
            return found._replace(quality=self.stored_quality(key))
        return found

    def stored_quality(self, key: str) -> int:
        """The quality in the sidecar of ``key``'s result; 0 when it is missing or garbled.

        Never an error: the header is an aid, and the result is served
        without it. The sidecar was written before the result
        (:func:`~django_oximg.core.serving.making.store_result`), so a
        result found has its sidecar, unless something removed it since.
        """
        try:
            found = self.cache.get(keys.quality_key(key))
            if found is None:
                return 0
            # One byte more than a quality takes: a longer sidecar is garbled.
            return keys.quality_from(found.head(keys.QUALITY_BYTES + 1))
        except OSError as error:
            logger.debug("quality sidecar of %s unreadable: %s", key, error)
            return 0

    def admitted(self, job: Job, made_before: int) -> CachedResult:
        """The flight's leader: take a place in the executor, then the lease."""
        with self.executor.admit() as admission:
            return self.cached_or_made(job, made_before, admission)

    def cached_or_made(self, job: Job, made_before: int, admission: Admission) -> CachedResult:
        """Run once per key in flight: make the answer, or read a peer's.

        Followers share what this returns, so a remote store's stream is
        read into memory first.
        """
        if self.coordinator.acquire(job.key):
            return self.made_under_lease(job, made_before, admission)
        give_up = time.monotonic() + self.peer_wait
        pause = 0.0  # the lease is read at once: it may say "done" already
        while True:
            time.sleep(pause)
            pause = min(max(pause * 2, PEER_POLL_FIRST), PEER_POLL_MAX)
            state = self.coordinator.state(job.key)
            if state is LeaseState.DONE:
                cached = self.looked_up(job)
                if cached is not None:
                    with self._lock:
                        self.peer_results += 1
                    return cached.in_memory()
                # Stored and gone again (a purge): make it here.
                return self.made_after_waiting(job, admission)
            if state is LeaseState.UNKNOWN:
                return self.made_after_waiting(job, admission)
            if state is LeaseState.FREE and self.coordinator.acquire(job.key):
                # The holder failed or died: the lease lapsed, and it is ours.
                admission.restart()
                return self.made_under_lease(job, made_before, admission)
            if time.monotonic() >= give_up:
                logger.warning("no result from the lease holder of %s; making it here", job.key)
                return self.made_after_waiting(job, admission)

    def made_under_lease(self, job: Job, made_before: int, admission: Admission) -> CachedResult:
        """Make the answer holding the lease; the lease then says "done", or is given back.

        The cache is looked at again only when this process made an answer
        since the caller's miss (a flight that ended just before this one
        started). A peer that stored it in between would have left its lease
        saying "done", so it is not looked for here.
        """
        try:
            cached = self.looked_up(job) if self.maker.made != made_before else None
            result = cached.in_memory() if cached is not None else self.maker.make(job, admission)
        except BaseException:
            self.coordinator.release(job.key)
            raise
        self.coordinator.finish(job.key)
        return result

    def made_after_waiting(self, job: Job, admission: Admission) -> CachedResult:
        """Make the answer here, without the lease, after waiting for a peer in vain."""
        admission.restart()
        return self.maker.make(job, admission)
