"""One request, start to finish: the entry point both ways in call, and its reply.

Steps 1 and 9 of a request (the map: :mod:`django_oximg.core.serving`).

Both ways in (the Django view and the WSGI middleware) call
:meth:`Thumbnailer.reply`; neither holds any logic of its own beyond deciding
whether a path is theirs. The steps a request walks from here are mapped in
:mod:`django_oximg.core.serving`.

This module builds those steps' parts from a :class:`ThumbnailerConfig`, the
:class:`~django_oximg.core.serving.staging.Limits` and the source reads, and keeps
what the health check and the metrics read of them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from django_oximg.core import defaults, errors, keys, pipeline
from django_oximg.core.limits.executor import Executor
from django_oximg.core.limits.timeouts import RENDER_OVERRUN, RequestTimeouts
from django_oximg.core.logs import printable
from django_oximg.core.options import ANY_URL, URLRules
from django_oximg.core.options.signing import URLSigner
from django_oximg.core.serving import metrics, replies
from django_oximg.core.serving.client_hints import NO_HINTS, ClientHints, read_hints
from django_oximg.core.serving.coordination import Coordinator, LocalCoordinator
from django_oximg.core.serving.faults import Faults
from django_oximg.core.serving.hits import CachedFile, HitCache
from django_oximg.core.serving.jobs import Job, JobReader
from django_oximg.core.serving.lookup import Lookup
from django_oximg.core.serving.making import Maker
from django_oximg.core.serving.negotiation import VARY_ACCEPT, accept_class
from django_oximg.core.serving.singleflight import SingleFlight
from django_oximg.core.serving.staging import Limits, check_servable
from django_oximg.core.stores.protocols import CacheStore, SourceStore
from django_oximg.core.stores.reads import SourceReads
from django_oximg.core.stores.resolver import SourceResolver

logger = logging.getLogger("django_oximg")

#: Remote source reads at once in a core built by hand (the runtime sizes
#: them from ``SOURCE_READS`` or the workers).
DEFAULT_SOURCE_READS = 4

#: What sources are checked against and renders run with in a core built
#: by hand: the settings' defaults.
DEFAULT_LIMITS = Limits()

#: Request variables that carry the query string (WSGI, and the raw URI).
RAW_URI_VARIABLES = ("RAW_URI", "REQUEST_URI")


@dataclass(frozen=True)
class ThumbnailerConfig:
    """Everything the thumbnailer needs from settings, already validated.

    ``runtime.thumbnailer_config`` builds it from ``OXIMG``; the defaults
    (:mod:`django_oximg.core.defaults`) serve a core built by hand.
    """

    presets: Mapping[str, str] = field(default_factory=dict)
    allow_unsigned: bool = defaults.ALLOW_UNSIGNED
    auto_format: bool = defaults.AUTO_FORMAT
    #: A URL without a format is ``format:best`` (``FORMAT_BEST_BY_DEFAULT``).
    best_by_default: bool = defaults.FORMAT_BEST_BY_DEFAULT
    #: How long a request waits for a peer process's render of the same key
    #: (:meth:`~django_oximg.core.limits.timeouts.RequestTimeouts.peer_wait`).
    peer_wait: float = RequestTimeouts(
        defaults.QUEUE_TIMEOUT, defaults.SOURCE_TIMEOUT, defaults.RENDER_TIMEOUT, 0.0, 0.0
    ).peer_wait()
    cache_control: str = defaults.CACHE_CONTROL
    #: Whether ``/metrics`` answers (it also needs prometheus-client installed).
    metrics: bool = defaults.METRICS
    #: A bearer token ``/metrics`` requires ("" for none).
    metrics_token: str = ""
    #: :func:`~django_oximg.core.keys.output_fingerprint` of the settings
    #: that change output bytes: part of every cache key.
    fingerprint: str = ""
    #: What URLs may say (``ALLOWED_PROCESSING_OPTIONS``, ``ONLY_PRESETS``).
    rules: URLRules = ANY_URL
    #: Whether ``DPR``/``Width`` client hints fill in ``dpr``/``width``.
    client_hints: bool = False
    #: Bytes of memory for answering repeated hits (``HIT_CACHE_BYTES``;
    #: :mod:`django_oximg.core.serving.hits`). 0 turns that off.
    hit_cache_bytes: int = defaults.HIT_CACHE_BYTES
    #: What a thumbnail whose source fails is answered with (``FALLBACK_IMAGE_*``);
    #: None: the error itself.
    fallback: replies.FallbackImage | None = None


class Thumbnailer:
    """Serves thumbnail and ``/info`` requests for one process (thread-safe)."""

    def __init__(
        self,
        config: ThumbnailerConfig,
        signer: URLSigner,
        sources: SourceResolver | Mapping[str, SourceStore],
        cache: CacheStore,
        executor: Executor,
        clock: Callable[[], float] = time.time,
        coordinator: Coordinator | None = None,
        faults: Faults | None = None,
        *,
        limits: Limits = DEFAULT_LIMITS,
        reads: SourceReads | None = None,
    ) -> None:
        """``sources``: the process's resolver, or the stores by alias to resolve with.

        ``faults``: where the calls to the caches and the source storages
        report how they went (the coordinator's own, when it has one).
        ``limits`` (what sources are checked against and renders run with)
        and ``reads`` (the bound on remote reads at once) go to the steps of
        a miss as they are: the runtime builds both from the settings.
        """
        self.config = config
        self.limits = limits
        self.faults = faults or Faults()
        self.signer = signer
        self.sources = sources if isinstance(sources, SourceResolver) else SourceResolver(sources)
        self.cache = cache
        self.executor = executor
        self.clock = clock
        self.flights = SingleFlight()
        #: Different answers from one source made at the same time share the
        #: read and probe (remote sources: every request in flight; local ones:
        #: the jobs running together, as they are read on the workers).
        self.source_reads = SingleFlight()
        self.reads = reads or SourceReads(DEFAULT_SOURCE_READS, defaults.SOURCE_TIMEOUT)
        self.coordinator: Coordinator = coordinator or LocalCoordinator()
        self.metrics = metrics.recorder_for(
            config.metrics, self.counts, executor, config.metrics_token
        )
        #: Raw paths of recent hits on local disk and their prebuilt answers.
        self.hits = HitCache(config.hit_cache_bytes, accept_class)
        self.jobs = JobReader(
            signer=signer,
            sources=self.sources,
            version=keys.cache_version(config.fingerprint, pipeline.libvips_version()),
            clock=clock,
            presets=config.presets,
            rules=config.rules,
            extensions=limits.render.extensions,
            allow_unsigned=config.allow_unsigned,
            auto_format=config.auto_format,
            best_by_default=config.best_by_default,
            client_hints=config.client_hints,
            watermark=limits.render.watermark is not None,
            max_result_dimension=limits.render.max_result_dimension,
            autoquality=limits.render.autoquality,
        )
        self.maker = Maker(
            cache, executor, limits, self.reads, self.source_reads, self.metrics, self.faults
        )
        self.lookup = Lookup(
            cache,
            executor,
            self.flights,
            self.coordinator,
            self.maker,
            config.peer_wait,
            self.metrics,
            self.faults,
        )

    # -- the public entry point --------------------------------------------------

    def reply(self, path: str, method: str, request_headers: Mapping[str, str]) -> replies.Reply:
        """Answer one request for ``path`` (raw, still percent-encoded, after the mount prefix).

        ``/health`` and ``/metrics`` exactly are the operational endpoints; a
        thumbnail path always has more segments, so the two never clash.
        ``/info/...`` asks for a source's info, as in imgproxy (a thumbnail
        signature can only read "info" with a 3-byte ``SIGNATURE_SIZE``, a 1
        in 2**24 chance; that URL is then refused).
        """
        if path in metrics.ENDPOINTS:
            return metrics.endpoint_reply(
                path, method, request_headers, self.metrics, self.health_problems
            )
        try:
            answer = self.remembered(path, method, request_headers) or self.answer(
                path, method, request_headers
            )
        except Exception:  # not swallowed: the server turns it into a 500, counted here
            self.metrics.count_request(500)
            raise
        self.metrics.count_request(answer.status)
        return answer

    def check_servable(self, data: bytes) -> pipeline.SourceInfo:
        """Refuse a source this thumbnailer would refuse every thumbnail of; its header.

        For uploads (``django_oximg.validators``): the limits are this
        thumbnailer's own and the memory budget its executor's, so a form
        accepts exactly what the server renders.
        """
        return check_servable(data, self.maker.limits, self.executor.memory_budget)

    def health_problems(self) -> list[str]:
        """What keeps this process from serving thumbnails (``/health``); empty when healthy.

        Besides libvips, the executor and the cache directory: every
        dependency whose latest call failed (:mod:`~django_oximg.core.serving.faults`:
        result cache writes and lookups, source storages, the coordination
        cache, which is asked once here so that its recovery shows); every
        render worker on a job longer than any job may take (the queue
        timeout for its memory, the render deadline and a second for an
        encoder that cannot be stopped); or every remote read slot held by a
        read that outlived its timeout. Either of the last two means
        something hangs where no deadline reaches, and misses can no longer
        be served.
        """
        self.coordinator.check()
        problems = metrics.health_problems(self.executor, self.cache)
        problems.extend(self.faults.problems())
        longest_job = self.executor.queue_timeout + self.limits.render_timeout + RENDER_OVERRUN
        if self.executor.stuck_workers(longest_job) == self.executor.workers:
            problems.append(
                f"all {self.executor.workers} render workers busy for more than {longest_job:g} s"
            )
        if self.reads.stuck() == self.reads.slots:
            problems.append(
                f"all {self.reads.slots} source read slots held by reads "
                f"past their {self.reads.timeout:g} s timeout"
            )
        return problems

    def counts(self) -> metrics.Counts:
        """This thumbnailer's counters as one snapshot (read when metrics are scraped)."""
        coalesced = self.flights.stats().coalesced
        with self.maker.lock:
            renders, source_loads = self.maker.renders, self.maker.source_loads
        return metrics.Counts(
            renders,
            source_loads,
            coalesced,
            self.lookup.peer_results,
            self.faults.failure_counts(),
            frozenset(self.faults.failing()),
        )

    @property
    def renders(self) -> int:
        """Renders made and stored by this thumbnailer (``raw`` answers too)."""
        return self.maker.renders

    @property
    def source_loads(self) -> int:
        """Sources read and probed (once for the jobs that shared a read)."""
        return self.maker.source_loads

    @property
    def peer_results(self) -> int:
        """Answers another process made, read from the shared cache."""
        return self.lookup.peer_results

    # -- one request --------------------------------------------------------------

    def remembered(
        self, path: str, method: str, request_headers: Mapping[str, str]
    ) -> replies.Reply | None:
        """The answer from :attr:`hits`, or None when ``path`` must take the full path.

        The map holds only paths the full path answered from a local file,
        so what it checked then still holds (:mod:`django_oximg.core.serving.hits`);
        the file itself is checked here, on every use.
        """
        if method not in replies.METHODS or has_query(request_headers):
            return None
        found = self.hits.lookup(path, request_headers.get("HTTP_ACCEPT", ""))
        if found is None:
            return None
        reply = found.reply(method, request_headers) if found.is_current() else None
        if reply is None:  # purged, cleaned or rendered again: look it up afresh
            self.hits.forget(path, found)
            return None
        self.metrics.count_cache_lookup(hit=True)
        return reply

    def answer(self, path: str, method: str, request_headers: Mapping[str, str]) -> replies.Reply:
        """The reply for a thumbnail or info path, or for the project error that stopped it."""
        if method not in replies.METHODS:
            return replies.method_not_allowed()
        if has_query(request_headers):
            return replies.not_found()
        job: Job | None = None
        try:
            accept = request_headers.get("HTTP_ACCEPT", "")
            hints = read_hints(request_headers) if self.config.client_hints else NO_HINTS
            job = self.job_for(path, accept, hints)
            cache_control = replies.cache_control(
                self.config.cache_control, job.expires, self.clock()
            )
            result = self.lookup.result_for(job)
            if result.path is not None:
                headers = replies.result_headers(result, cache_control)
                reply = self.file_answer(
                    path, accept, job, result.path, headers, method, request_headers
                )
                if reply is not None:
                    return reply
                # The file went away since the lookup (a purge or a clean).
                result = self.lookup.result_for(job, look=False)
            return replies.result_reply(result, method, request_headers, cache_control)
        except errors.OximgError as error:
            level = logging.WARNING if replies.status_for(error) >= 500 else logging.INFO
            # Both come from the request: escaped, so that no URL can write
            # a line break (a forged log line) or a terminal escape.
            logger.log(
                level,
                "%s %s: %s",
                type(error).__name__,
                printable(path, 200),
                printable(error.detail, 500),
            )
            fallback = self.config.fallback
            if fallback and job and job.work.is_render and replies.is_source_failure(error):
                # A signed thumbnail URL whose source fails: never cached, as any error.
                return replies.fallback_reply(fallback, method)
            return replies.error_reply(error, method)

    def job_for(self, path: str, accept: str, hints: ClientHints = NO_HINTS) -> Job:
        """Verify and parse ``path`` into a :class:`.Job`, with no storage touched."""
        return self.jobs.job_for(path, accept, hints)

    def file_answer(
        self,
        path: str,
        accept: str,
        job: Job,
        file_path: str,
        headers: list[tuple[str, str]],
        method: str,
        request_headers: Mapping[str, str],
    ) -> replies.Reply | None:
        """Answer from the cached file at ``file_path`` and remember it for ``path``.

        None when the file is gone by now. URLs that expire are not
        remembered: their Cache-Control is their own and counts down.
        """
        found = CachedFile.load(job.key, file_path, headers, self.hits.max_body)
        if found is None:
            return None
        if not job.expires and set(job.vary) <= set(VARY_ACCEPT):
            # Only answers that depend on the Accept class alone: one that
            # client hints change is looked up in full every time.
            self.hits.remember(path, bool(job.vary), accept, found)
        return found.reply(method, request_headers)


def has_query(request_headers: Mapping[str, str]) -> bool:
    """Whether the request URL has a query string (even an empty one).

    Thumbnail URLs have none: a query string would make another URL for the
    same image (:func:`~django_oximg.core.serving.replies.not_found`).
    """
    if request_headers.get("QUERY_STRING"):
        return True
    for name in RAW_URI_VARIABLES:
        raw = request_headers.get(name)
        if raw and "?" in str(raw):
            return True
    return False
