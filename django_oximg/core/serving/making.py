"""A miss made: its source read once, its work staged and run on the executor, the result stored.

Steps 5 and 8 of a request, the miss (the map: :mod:`django_oximg.core.serving`).

Called once per key in flight (:mod:`~django_oximg.core.serving.lookup` sees to
that), with the request's place in the executor. The source is read where
it costs least: a store that reads on the worker (local disk) is read there,
once the job's turn has come, so requests waiting in the queue hold no
source bytes; any other (S3, HTTP) on the request thread, in a bounded
number of read slots, so a network wait never holds a render slot. Either
way the read and the header are shared by every job on that source made at
the same time, then the job's work is staged
(:mod:`~django_oximg.core.serving.staging`) and run within the memory budget, and
the result is written to the cache (with, for a quality ``autoquality``
searched, its sidecar first: :func:`store_result`); a failed write is
logged and the result still served.
"""

from __future__ import annotations

import functools
import logging
import threading

from django_oximg.core import keys, pipeline
from django_oximg.core.errors import SourceTimeout, SourceUnavailable
from django_oximg.core.limits.executor import Admission, Executor
from django_oximg.core.serving import metrics
from django_oximg.core.serving.faults import RESULT_CACHE_WRITE, Faults, source_dependency
from django_oximg.core.serving.jobs import Job
from django_oximg.core.serving.singleflight import SingleFlight
from django_oximg.core.serving.staging import Limits, SourceRead, Staged
from django_oximg.core.stores.protocols import CachedResult, CacheStore
from django_oximg.core.stores.reads import SourceReads
from django_oximg.core.stores.resolver import URL_ALIAS


class Maker:
    """Makes and stores the answers of one thumbnailer's misses (thread-safe)."""

    def __init__(
        self,
        cache: CacheStore,
        executor: Executor,
        limits: Limits,
        reads: SourceReads,
        source_reads: SingleFlight,
        recorder: metrics.Recorder,
        faults: Faults | None = None,
    ) -> None:
        """``reads``: the remote read slots; ``source_reads``: reads shared by source.

        ``faults`` hears how each cache write and source read went.
        """
        self.faults = faults or Faults()
        self.cache = cache
        self.executor = executor
        self.limits = limits
        self.reads = reads
        self.source_reads = source_reads
        self.metrics = recorder
        self.renders = 0
        self.source_loads = 0
        #: Answers made; a miss seen before a change of it may have been
        #: filled by one of them since (see :class:`~django_oximg.core.serving.lookup.Lookup`).
        self.made = 0
        self.lock = threading.Lock()

    def make(self, job: Job, admission: Admission) -> CachedResult:
        """Read, check, make within budget and deadline, then cache the answer.

        ``admission`` is the request's place in the executor. A source whose
        store reads on the worker is read there, in a staged job; other
        sources are read here, the bytes reserved from the memory budget as
        they arrive (:meth:`read_source`). An ``/info`` answered from the
        header alone takes no worker.
        """
        if not job.needs_worker:
            made = self.stage(job, admission).run()
        elif job.source.store.read_on_worker:
            made = self.executor.run_staged(lambda: self.stage(job, admission), admission=admission)
        else:
            staged = self.stage(job, admission)
            made = self.executor.run(staged.run, cost=staged.cost, admission=admission)
        if made.search:
            self.metrics.observe_quality_search(made.search, made.search_encodes)
        self.store(job.key, made.data, made.quality)
        with self.lock:
            self.made += 1
            if job.work.is_render:
                self.renders += 1
        return CachedResult(size=len(made.data), data=made.data, quality=made.quality)

    def stage(self, job: Job, admission: Admission) -> Staged:
        """Read and check the source; the job's work with its memory estimate."""
        source, _shared = self.source_reads.do(
            job.source.source, lambda: self.read_source(job, admission)
        )
        return job.work.stage(source, self.limits, self.metrics.observe_render)

    def read_source(self, job: Job, admission: Admission) -> SourceRead:
        """Read the source and its header (shared by concurrent jobs on one source).

        Local disk is read as it is; any other store in a read slot, within
        the source timeout, its bytes reserved on ``admission``
        (:class:`~django_oximg.core.stores.reads.SourceReads`). Jobs that share the
        read share its bytes; the reading request's reservation counts them
        once.
        """
        store, limit = job.source.store, self.limits.max_src_file_size
        # Storages are the site's own, so their failures are the server's
        # faults; an HTTP source that fails is somebody else's site.
        dependency = "" if job.source.alias == URL_ALIAS else source_dependency(job.source.alias)
        try:
            if store.read_on_worker:
                data = store.read(job.source.name, limit)
            else:
                late = functools.partial(self.read_ended_late, dependency) if dependency else None
                data = self.reads.read(store, job.source.name, limit, admission, late)
        except (SourceUnavailable, SourceTimeout) as error:
            if dependency:
                self.faults.failed(dependency, error.detail or str(error))
            raise
        if dependency:
            self.faults.succeeded(dependency)
        info = pipeline.probe(data)
        with self.lock:
            self.source_loads += 1
        return SourceRead(data, info)

    def read_ended_late(self, dependency: str, error: BaseException | None) -> None:
        """A read its request gave up on has ended: the storage answers again, or not."""
        if error is None or not isinstance(error, SourceUnavailable | SourceTimeout):
            self.faults.succeeded(dependency)  # it answered (a 404 is an answer too)
        else:
            self.faults.failed(dependency, error.detail or str(error))

    def store(self, key: str, data: bytes, quality: int = 0) -> None:
        """Write to the cache (:func:`store_result`); a failure is reported, logged
        (rate-limited) and the result still served."""
        try:
            store_result(self.cache, key, data, quality)
        except OSError as exc:
            log = f"result cache write failed for {key}"
            self.faults.failed(RESULT_CACHE_WRITE, str(exc), log, logging.ERROR)
        else:
            self.faults.succeeded(RESULT_CACHE_WRITE)


def store_result(cache: CacheStore, key: str, data: bytes, quality: int = 0) -> None:
    """Write ``data`` under ``key``, and first the sidecar of its searched ``quality``.

    The sidecar first: the result's presence commits it, so no reader sees
    a result without the quality it was made at. A sidecar whose result
    write then fails is harmless (read only beside a result, and
    overwritten by the next render); a sidecar write that fails stops the
    result's, so that no result is stored without its header. A result of
    no searched quality (0) has no sidecar and costs no extra write.
    """
    if quality:
        cache.put(keys.quality_key(key), keys.quality_bytes(quality))
    cache.put(key, data)
