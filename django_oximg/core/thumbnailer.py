"""One request, start to finish: verify, parse, look up, admit, make, store.

Both ways in (the Django view and the WSGI middleware) call
:meth:`Thumbnailer.reply`; neither holds any logic of its own beyond deciding
whether a path is theirs. Thumbnails and ``/info`` documents take one path:
they differ only in how a path is parsed (:meth:`Thumbnailer.job_for`) and in
what is made from the source (:class:`RenderWork`, :class:`InfoWork`).
"""

from __future__ import annotations

import functools
import logging
import posixpath
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from django_oximg.core import defaults, errors, keys, metrics, pipeline, responders
from django_oximg.core import info as info_endpoint
from django_oximg.core.budget import estimate_peak_bytes
from django_oximg.core.client_hints import NO_HINTS, ClientHints, read_hints, with_hints
from django_oximg.core.coordination import Coordinator, LocalCoordinator
from django_oximg.core.executor import Admission, Executor
from django_oximg.core.hits import CachedFile, HitCache
from django_oximg.core.logs import printable
from django_oximg.core.options import (
    ANY_URL,
    Options,
    URLRules,
    build_path,
    lowered_limit,
    parse_path,
)
from django_oximg.core.reads import SourceReads
from django_oximg.core.signing import URLSigner, verified_rest
from django_oximg.core.singleflight import SingleFlight
from django_oximg.core.sources import Resolved, SourceResolver
from django_oximg.core.stores import CachedResult, CacheStore, SourceStore

logger = logging.getLogger("django_oximg")

#: Formats that can carry animation.
ANIMATED_FORMATS = frozenset({"webp", "gif"})

#: Source names that may hold an animation: never negotiated to AVIF.
ANIMATED_SOURCE_EXTENSIONS = frozenset({".gif", ".webp"})

#: Web formats a source can be served as when the client accepts neither AVIF
#: nor WebP, by the source name's extension; anything else becomes JPEG.
FALLBACK_FORMATS = {".png": "png", ".gif": "gif", ".jpg": "jpeg", ".jpeg": "jpeg"}

#: What the answer to a URL with a negotiated format depends on.
VARY_ACCEPT = ("Accept",)

#: Polling a shared result cache for a peer's render: first pause and cap (s).
PEER_POLL_FIRST = 0.02
PEER_POLL_MAX = 0.25

#: A lease outlives the longest wait by this much, so a holder that was killed
#: blocks its peers for a bounded time only.
LEASE_MARGIN = 5.0

#: A worker on one job for longer than the queue timeout plus the render
#: deadline plus this is stuck (the health check reports it).
STUCK_MARGIN = 1.0

#: Distinct Accept headers whose format class is kept (browsers send a few).
ACCEPT_CLASSES_KEPT = 256

#: Seconds between two log lines about failing cache writes.
CACHE_ERROR_LOG_INTERVAL = 60.0

#: Request variables that carry the query string (WSGI, and the raw URI).
RAW_URI_VARIABLES = ("RAW_URI", "REQUEST_URI")


@dataclass(frozen=True)
class ThumbnailerConfig:
    """Everything the thumbnailer needs from settings, already validated.

    ``runtime.thumbnailer_config`` builds it from ``OXIMG``; the defaults
    (:mod:`django_oximg.core.defaults`) serve a core built by hand.
    """

    render: pipeline.RenderSettings = field(default_factory=pipeline.RenderSettings)
    presets: Mapping[str, str] = field(default_factory=dict)
    allow_unsigned: bool = defaults.ALLOW_UNSIGNED
    auto_format: bool = defaults.AUTO_FORMAT
    max_src_resolution: int = defaults.MAX_SRC_RESOLUTION
    max_src_file_size: int = defaults.MAX_SRC_FILE_SIZE
    render_timeout: float = defaults.RENDER_TIMEOUT
    #: Remote source reads (HTTP, S3, other storages) at once, and the
    #: longest one may take (:class:`~django_oximg.core.reads.SourceReads`).
    source_reads: int = 4
    source_timeout: float = defaults.SOURCE_TIMEOUT
    #: How long a request waits for a peer process's render of the same key.
    peer_wait: float = defaults.QUEUE_TIMEOUT + defaults.RENDER_TIMEOUT
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
    #: :mod:`django_oximg.core.hits`). 0 turns that off.
    hit_cache_bytes: int = defaults.HIT_CACHE_BYTES


@dataclass(frozen=True)
class RenderWork:
    """A thumbnail: the source rendered with ``options`` into ``format``."""

    options: Options
    format: str


@dataclass(frozen=True)
class InfoWork:
    """An ``/info`` document about the source."""

    request: info_endpoint.InfoRequest


@dataclass(frozen=True)
class Job:
    """A verified, parsed request: what to make of which source, and where it is kept."""

    source: Resolved
    work: RenderWork | InfoWork
    key: str
    #: Request headers the answer depends on (sent as ``Vary``).
    vary: tuple[str, ...] = ()
    #: The URL's ``expires`` (unix time), 0 when it has none.
    expires: int = 0
    #: ``Content-Disposition`` of the answer ("": none is sent).
    disposition: str = ""

    @property
    def etag(self) -> str:
        return keys.etag(self.key)

    @property
    def needs_worker(self) -> bool:
        """Whether making the answer decodes pixels (an ``/info`` from the header does not)."""
        return not isinstance(self.work, InfoWork) or self.work.request.needs_pixels

    @property
    def content_type(self) -> str:
        return keys.content_type(self.key)

    def result(self, found: CachedResult) -> responders.Result:
        """This request's answer with ``found``'s content.

        Built per request, never shared: requests that share one cache
        object or one render may still differ in their ``Vary``.
        """
        return responders.Result(
            self.content_type,
            self.etag,
            self.vary,
            data=found.data,
            path=found.path,
            size=found.size,
            stream=found.stream,
            url=found.url,
            disposition=self.disposition,
        )


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
    ) -> None:
        """``sources``: the process's resolver, or the stores by alias to resolve with."""
        self.config = config
        self.signer = signer
        self.sources = sources if isinstance(sources, SourceResolver) else SourceResolver(sources)
        self.cache = cache
        self.executor = executor
        self.flights = SingleFlight()
        #: Different answers from one source made at the same time share the
        #: read and probe (remote sources: every request in flight; local ones:
        #: the jobs running together, as they are read on the workers).
        self.source_reads = SingleFlight()
        self.reads = SourceReads(config.source_reads, config.source_timeout)
        self.coordinator: Coordinator = coordinator or LocalCoordinator()
        self.clock = clock
        self.renders = 0
        self.source_loads = 0
        self.peer_results = 0
        #: Answers this process has made; a miss seen before a change of it
        #: may have been filled by one of them since (see :meth:`result_for`).
        self.made = 0
        self._version = keys.cache_version(config.fingerprint, pipeline.libvips_version())
        # -inf, not 0: time.monotonic() may be below the interval just after boot.
        self._last_cache_error = float("-inf")
        self._lock = threading.Lock()
        self.metrics = metrics.recorder_for(
            config.metrics, self.counts, executor, config.metrics_token
        )
        #: Raw paths of recent hits on local disk and their prebuilt answers.
        self.hits = HitCache(config.hit_cache_bytes, accept_class)

    # -- the public entry point --------------------------------------------------

    def reply(self, path: str, method: str, request_headers: Mapping[str, str]) -> responders.Reply:
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

    def health_problems(self) -> list[str]:
        """What keeps this process from serving thumbnails (``/health``); empty when healthy.

        Besides libvips, the executor and the cache: every render worker on
        a job longer than any job may take (the queue timeout for its
        memory, the render deadline and a second for an encoder that cannot
        be stopped), or every remote read slot held by a read that outlived
        its timeout. Either means something hangs where no deadline
        reaches, and misses can no longer be served.
        """
        problems = metrics.health_problems(self.executor, self.cache)
        longest_job = self.executor.queue_timeout + self.config.render_timeout + STUCK_MARGIN
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
        with self._lock:
            return metrics.Counts(self.renders, self.source_loads, coalesced, self.peer_results)

    # -- one request --------------------------------------------------------------

    def remembered(
        self, path: str, method: str, request_headers: Mapping[str, str]
    ) -> responders.Reply | None:
        """The answer from :attr:`hits`, or None when ``path`` must take the full path.

        The map holds only paths the full path answered from a local file,
        so what it checked then still holds (:mod:`django_oximg.core.hits`);
        the file itself is checked here, on every use.
        """
        if method not in responders.METHODS or has_query(request_headers):
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

    def answer(
        self, path: str, method: str, request_headers: Mapping[str, str]
    ) -> responders.Reply:
        """The reply for a thumbnail or info path, or for the project error that stopped it."""
        if method not in responders.METHODS:
            return responders.method_not_allowed()
        if has_query(request_headers):
            return responders.not_found()
        try:
            accept = request_headers.get("HTTP_ACCEPT", "")
            hints = read_hints(request_headers) if self.config.client_hints else NO_HINTS
            job = self.job_for(path, accept, hints)
            cache_control = responders.cache_control(
                self.config.cache_control, job.expires, self.clock()
            )
            result = self.result_for(job)
            if result.path is not None:
                headers = responders.result_headers(result, cache_control)
                reply = self.file_answer(
                    path, accept, job, result.path, headers, method, request_headers
                )
                if reply is not None:
                    return reply
                # The file went away since the lookup (a purge or a clean).
                result = self.result_for(job, look=False)
            return responders.result_reply(result, method, request_headers, cache_control)
        except errors.OximgError as error:
            level = logging.WARNING if responders.status_for(error) >= 500 else logging.INFO
            # Both come from the request: escaped, so that no URL can write
            # a line break (a forged log line) or a terminal escape.
            logger.log(
                level,
                "%s %s: %s",
                type(error).__name__,
                printable(path, 200),
                printable(error.detail, 500),
            )
            return responders.error_reply(error, method)

    def job_for(self, path: str, accept: str, hints: ClientHints = NO_HINTS) -> Job:
        """Verify and parse ``path`` into a :class:`Job`. No storage is touched.

        The source is resolved here, before any cache lookup, so a source the
        configuration no longer allows (a host removed from ``HTTP_SOURCES``)
        is refused rather than served from the cache. ``hints`` are the
        request's client hints (only read with ``client_hints`` on).
        """
        if info_endpoint.is_info_path(path):
            return self._info_job(info_endpoint.signed_part(path))
        rest = verified_rest(path, self.signer, self.config.allow_unsigned)
        parsed = parse_path(rest, self.config.presets, self.config.rules)
        options, hinted = parsed.options, tuple[str, ...]()
        if self.config.client_hints:
            options, hinted = with_hints(parsed, hints)
        self._check_expiry(options.expires)
        if options.watermark.opacity and self.config.render.watermark is None:
            raise errors.InvalidOptions(
                detail="watermark: OXIMG['WATERMARK'] is not set", public="Invalid watermark"
            )
        source = self.sources.resolve(parsed.source)
        fmt, negotiated = self.output_format(options, source.name, accept)
        # The canonical request: what decides the bytes. ``expires`` decides
        # only whether there is an answer, so URLs that differ in it share one.
        canonical = build_path(replace(options, format=fmt, expires=0), parsed.source)
        key = keys.result_key(parsed.source, canonical, self._version, fmt)
        vary = (VARY_ACCEPT if negotiated else ()) + hinted
        disposition = ""
        if options.filename or options.return_attachment:
            disposition = responders.content_disposition(
                parsed.source, options.filename, fmt, attachment=options.return_attachment
            )
        return Job(source, RenderWork(options, fmt), key, vary, options.expires, disposition)

    def _info_job(self, signed: str) -> Job:
        rest = verified_rest(signed, self.signer, self.config.allow_unsigned)
        request = info_endpoint.parse_info_path(rest)
        self._check_expiry(request.expires)
        source = self.sources.resolve(request.source)
        key = keys.result_key(request.source, request.canonical(), self._version, "json")
        return Job(source, InfoWork(request), key, (), request.expires)

    def _check_expiry(self, expires: int) -> None:
        if expires and expires < self.clock():
            raise errors.ExpiredURL(f"expired at {expires}")

    def output_format(self, options: Options, name: str, accept: str) -> tuple[str, bool]:
        """The output format and whether it was negotiated from Accept.

        ``raw`` answers, and ``skip_processing`` answers for a format the
        source's name says, are the source itself: in the format of its name,
        never negotiated (the name is all there is before the source is read).
        """
        if options.format:
            return options.format, False
        fallback = FALLBACK_FORMATS.get(posixpath.splitext(name)[1].lower(), "jpeg")
        if not self.config.auto_format or options.raw or fallback in options.skip_processing:
            return fallback, False
        return negotiate(accept, fallback, may_be_animated(name)), True

    def file_answer(
        self,
        path: str,
        accept: str,
        job: Job,
        file_path: str,
        headers: list[tuple[str, str]],
        method: str,
        request_headers: Mapping[str, str],
    ) -> responders.Reply | None:
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

    def result_for(self, job: Job, look: bool = True) -> responders.Result:
        """The cached answer, or a fresh one made once for concurrent identical requests.

        The flight shares only the content: each request builds its own
        result from it (:meth:`Job.result`); ``look=False`` skips the first
        lookup (the caller found the file gone). The request that makes it is
        admitted first (a place among ``WORKERS + QUEUE_SIZE``, or a 429 at
        once), before it reads anything; requests that wait for an
        identical one take no place of their own.
        """
        made_before = self.made
        cached = self.cache.get(job.key) if look else None
        if look:
            self.metrics.count_cache_lookup(hit=cached is not None)
        if cached is not None:
            return job.result(cached)
        content, _shared = self.flights.do(job.key, lambda: self._admitted(job, made_before))
        return job.result(content)

    def _admitted(self, job: Job, made_before: int) -> CachedResult:
        with self.executor.admit() as admission:
            return self._cached_or_made(job, made_before, admission)

    def _cached_or_made(self, job: Job, made_before: int, admission: Admission) -> CachedResult:
        """Run once per key in flight: make the answer, unless it appeared meanwhile.

        The cache is looked at again, once the lease is held, only when it
        may have changed since the caller's miss: when this process made an
        answer in between (a flight that ended just before this one
        started), or when other processes share the cache (a peer may have
        stored it and released its lease in between). While a peer holds the
        lease, the cache is polled for its result. Followers share what this
        returns, so a remote store's stream is read into memory first.
        """
        lease_ttl = self.config.peer_wait + LEASE_MARGIN
        give_up = time.monotonic() + self.config.peer_wait
        pause = PEER_POLL_FIRST
        look = self.made != made_before or self.coordinator.shared
        while True:
            if self.coordinator.acquire(job.key, lease_ttl):
                try:
                    cached = self.cache.get(job.key) if look else None
                    return cached.in_memory() if cached is not None else self.make(job, admission)
                finally:
                    self.coordinator.release(job.key)
            # Another process holds the lease: its result will be in the cache.
            if time.monotonic() >= give_up:
                # The holder is stuck or was killed: make it here rather than fail.
                logger.warning("no result from the lease holder of %s; making it here", job.key)
                return self.make(job, admission)
            time.sleep(pause)
            pause = min(pause * 2, PEER_POLL_MAX)
            cached = self.cache.get(job.key)
            if cached is not None:
                with self._lock:
                    self.peer_results += 1
                return cached.in_memory()
            look = True  # the peer may finish between this look and our lease

    def make(self, job: Job, admission: Admission) -> CachedResult:
        """Read, check, make within budget and deadline, then cache the answer.

        ``admission`` is the request's place in the executor. A source whose
        store reads on the worker (local disk) is read there, once the job's
        turn has come (a staged job), so requests waiting in the queue hold
        no source bytes and the memory budget really bounds the process.
        Other sources (S3, HTTP) are read here, on the request thread, so a
        network wait never holds a render slot, in one of a bounded number
        of read slots and within the source timeout, the bytes reserved
        from the memory budget as they arrive (:meth:`load_source`).
        """
        if not job.needs_worker:
            data = self.prepare(job, admission)[1]()
        elif job.source.store.read_on_worker:
            data = self.executor.run_staged(
                lambda: self.prepare(job, admission), admission=admission
            )
        else:
            cost, produce = self.prepare(job, admission)
            data = self.executor.run(produce, cost=cost, admission=admission)
        self.store_result(job.key, data)
        with self._lock:
            self.made += 1
            if isinstance(job.work, RenderWork):
                self.renders += 1
        return CachedResult(size=len(data), data=data)

    def prepare(self, job: Job, admission: Admission) -> tuple[int, Callable[[], bytes]]:
        """Read and check the source; return the work's memory estimate and the work."""
        data, info = self.source_reads.do(
            job.source.source, lambda: self.load_source(job, admission)
        )[0]
        if isinstance(job.work, InfoWork):
            return self._prepare_info(job.work.request, data, info)
        return self._prepare_render(job.work, data, info)

    def _prepare_render(
        self, work: RenderWork, data: bytes, info: pipeline.SourceInfo
    ) -> tuple[int, Callable[[], bytes]]:
        options = work.options
        self.check_file_size(data, options)
        if options.raw or self.skips_processing(info, work):
            return self._prepare_unprocessed(work, data, info)
        if options.enforce_thumbnail:
            info = pipeline.embedded_thumbnail(data, info)
        frames = self.frames_to_render(info, work.format, options)
        self.check_resolution(info, frames, options)
        # Planned once: the estimate and the render share the plan.
        plan = pipeline.plan_render(info, options, work.format, self.config.render)
        self.check_encode_time(plan)
        cost = estimate_peak_bytes(plan, frames, data)

        def render() -> bytes:
            started = time.monotonic()
            deadline = started + self.config.render_timeout
            try:
                rendered = pipeline.render(
                    data,
                    options,
                    work.format,
                    self.config.render,
                    deadline=deadline,
                    plan=plan,
                )
                return rendered.data
            finally:  # failed and killed renders took their time too
                self.metrics.observe_render(time.monotonic() - started)

        return cost, render

    def _prepare_info(
        self, request: info_endpoint.InfoRequest, data: bytes, info: pipeline.SourceInfo
    ) -> tuple[int, Callable[[], bytes]]:
        """The header answers everything but the BlurHash and dominant colour;
        those come from a tiny shrink-on-load thumbnail, with its own (small)
        memory estimate and the render deadline."""
        if not request.needs_pixels:
            return 0, lambda: info_endpoint.info_document(info, len(data), None)
        self.check_resolution(info, 1, Options())
        cost = estimate_peak_bytes(pipeline.summary_plan(info, self.config.render), 1, data)

        def summarise() -> bytes:
            deadline = time.monotonic() + self.config.render_timeout
            summary = pipeline.summarise(
                data, request.blurhash, request.dominant_color, deadline=deadline
            )
            return info_endpoint.info_document(info, len(data), summary)

        return cost, summarise

    def load_source(self, job: Job, admission: Admission) -> tuple[bytes, pipeline.SourceInfo]:
        """Read the source and its header (shared by concurrent jobs on one source).

        Local disk is read as it is; any other store in a read slot, within
        the source timeout, its bytes reserved on ``admission``
        (:class:`~django_oximg.core.reads.SourceReads`). Jobs that share the
        read share its bytes; the reading request's reservation counts them
        once.
        """
        store, limit = job.source.store, self.config.max_src_file_size
        if store.read_on_worker:
            data = store.read(job.source.name, limit)
        else:
            data = self.reads.read(store, job.source.name, limit, admission)
        info = pipeline.probe(data)
        with self._lock:
            self.source_loads += 1
        return data, info

    def _prepare_unprocessed(
        self, work: RenderWork, data: bytes, info: pipeline.SourceInfo
    ) -> tuple[int, Callable[[], bytes]]:
        """``raw`` and ``skip_processing``: the source's bytes, once checked as
        a render's source is (every frame counted, as the client decodes them all)."""
        found = pipeline.web_format(info)
        if found != work.format:
            raise errors.UnsupportedFormat(
                f"raw: the source is {found or info.format}, its name says {work.format}"
            )
        if info.frames > self.max_frames(work.options):
            raise errors.SourceTooLarge(f"raw: {info.frames} frames")
        self.check_resolution(info, info.frames, work.options)
        return len(data), lambda: data

    def skips_processing(self, info: pipeline.SourceInfo, work: RenderWork) -> bool:
        """Whether ``skip_processing`` serves this source as it is.

        As imgproxy: when its format is one named, and is the output format.
        An animation with more frames than allowed is rendered instead (as
        its first frame).
        """
        found = pipeline.web_format(info)
        return (
            found in work.options.skip_processing
            and found == work.format
            and info.frames <= self.max_frames(work.options)
        )

    def max_frames(self, options: Options) -> int:
        """The most frames an animation is served with (the URL may lower the setting)."""
        return lowered_limit(self.config.render.max_animation_frames, options.max_animation_frames)

    def frames_to_render(self, info: pipeline.SourceInfo, fmt: str, options: Options) -> int:
        if fmt in ANIMATED_FORMATS and 1 < info.frames <= self.max_frames(options):
            return info.frames
        return 1

    def check_resolution(self, info: pipeline.SourceInfo, frames: int, options: Options) -> None:
        """Refuse a source over the resolution limits (the URL may lower them).

        Every rendered frame counts; ``max_animation_frame_resolution``
        limits each frame of an animation as well (imgproxy checks only that
        one then, so a URL could raise the limit: here it only lowers it).
        """
        limit = lowered_limit(self.config.max_src_resolution, options.max_src_resolution)
        pixels = info.width * info.height * frames
        if pixels > limit:
            raise errors.SourceTooLarge(f"{info.width}x{info.height}x{frames} px exceeds {limit}")
        frame_limit = options.max_animation_frame_resolution
        if frames > 1 and frame_limit and info.width * info.height > frame_limit:
            raise errors.SourceTooLarge(
                f"{info.width}x{info.height} px frames exceed {frame_limit}"
            )

    def check_file_size(self, data: bytes, options: Options) -> None:
        """The URL's ``max_src_file_size`` (the configured one bounds the read itself)."""
        limit = lowered_limit(self.config.max_src_file_size, options.max_src_file_size)
        if len(data) > limit:
            raise errors.SourceTooLarge(f"{len(data)} bytes exceeds {limit}")

    def check_encode_time(self, plan: pipeline.Plan) -> None:
        """Refuse a result whose encoder alone would outlast the render deadline.

        Only the encoders the deadline cannot stop in this process are
        predicted (AVIF, GIF, WebP's alpha: :attr:`pipeline.Plan.encode_seconds`):
        such a render would run in a child process until the deadline killed
        it, every time it was asked for. Refused up front instead: 422, as
        for a result too large.
        """
        if plan.encode_seconds > self.config.render_timeout:
            geometry = plan.geometry
            raise errors.ResultTooLarge(
                f"a {geometry.width}x{geometry.height} {plan.format} result would take about "
                f"{plan.encode_seconds:.1f} s to encode, more than the render deadline "
                f"of {self.config.render_timeout:g} s"
            )

    def store_result(self, key: str, data: bytes) -> None:
        """Write to the cache; a failure is logged (rate-limited) and the result still served."""
        try:
            self.cache.put(key, data)
        except OSError as exc:
            now = time.monotonic()
            if now - self._last_cache_error >= CACHE_ERROR_LOG_INTERVAL:
                self._last_cache_error = now
                logger.error("result cache write failed for %s: %s", key, exc)


def has_query(request_headers: Mapping[str, str]) -> bool:
    """Whether the request URL has a query string (even an empty one).

    Thumbnail URLs have none: a query string would make another URL for the
    same image (:func:`~django_oximg.core.responders.not_found`).
    """
    if request_headers.get("QUERY_STRING"):
        return True
    for name in RAW_URI_VARIABLES:
        raw = request_headers.get(name)
        if raw and "?" in str(raw):
            return True
    return False


def accepted_types(accept: str) -> set[str]:
    """Media types in an Accept header with a non-zero q value."""
    accepted = set()
    for item in accept.lower().split(","):
        media, *params = (part.strip() for part in item.split(";"))
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if quality > 0:
            accepted.add(media)
    return accepted


def may_be_animated(name: str) -> bool:
    """Whether a source's name says it may hold an animation (GIF, WebP)."""
    return posixpath.splitext(name)[1].lower() in ANIMATED_SOURCE_EXTENSIONS


def negotiate(accept: str, fallback: str, animated: bool = False) -> str:
    """AVIF if the client accepts it, then WebP, then ``fallback``.

    Only explicit ``image/avif`` / ``image/webp`` entries count (``*/*`` does
    not: every browser sends it, including ones that cannot decode AVIF).
    A source that may be ``animated`` is never made AVIF, whose saver keeps
    one frame: WebP if accepted, else ``fallback``. The format must be known
    before the source is read (it is in the cache key), so the name decides,
    as imgproxy's own format choice passes AVIF over for animations.
    """
    for fmt in accept_class(accept).split():
        if not (animated and fmt == "avif"):
            return fmt
    return fallback


@functools.lru_cache(maxsize=ACCEPT_CLASSES_KEPT)
def accept_class(accept: str) -> str:
    """What :func:`negotiate` reads of an ``Accept`` header: "avif webp", "avif", "webp" or "".

    The formats it lists that negotiation may choose, in order of preference.
    Two headers of one class get the same answer to every URL, which is what
    lets cache hits be remembered per class. Kept per distinct header:
    browsers send a handful, and every request with a negotiated format asks.
    """
    accepted = accepted_types(accept)
    return " ".join(fmt for fmt in ("avif", "webp") if f"image/{fmt}" in accepted)
