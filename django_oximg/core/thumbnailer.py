"""One request, start to finish: verify, parse, look up, admit, render, store.

Both ways in (the Django view and the WSGI middleware) call
:meth:`Thumbnailer.reply`; neither holds any logic of its own beyond deciding
whether a path is theirs.
"""

from __future__ import annotations

import hashlib
import logging
import posixpath
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from django_oximg.core import errors, metrics, pipeline, responders
from django_oximg.core import info as info_endpoint
from django_oximg.core.budget import estimate_peak_bytes
from django_oximg.core.coordination import Coordinator, LocalCoordinator
from django_oximg.core.executor import Executor
from django_oximg.core.http_source import URL_ALIAS, is_url
from django_oximg.core.options import Options, build_path, parse_path
from django_oximg.core.signing import URLSigner, split_signed_path
from django_oximg.core.singleflight import SingleFlight
from django_oximg.core.stores import CachedResult, CacheStore, SourceStore

logger = logging.getLogger("django_oximg")

#: Bump when a change to the pipeline changes output bytes for the same
#: request: it is part of every cache key, so old results are never served.
PIPELINE_VERSION = "1"

#: Formats that can carry animation.
ANIMATED_FORMATS = frozenset({"webp", "gif"})

#: Web formats a source can be served as when the client accepts neither AVIF
#: nor WebP, by the source name's extension; anything else becomes JPEG.
FALLBACK_FORMATS = {".png": "png", ".gif": "gif", ".jpg": "jpeg", ".jpeg": "jpeg"}

#: Polling a shared result cache for a peer's render: first pause and cap (s).
PEER_POLL_FIRST = 0.02
PEER_POLL_MAX = 0.25

#: A lease outlives the longest wait by this much, so a holder that was killed
#: blocks its peers for a bounded time only.
LEASE_MARGIN = 5.0

#: Seconds between two log lines about failing cache writes.
CACHE_ERROR_LOG_INTERVAL = 60.0


@dataclass(frozen=True)
class ThumbnailerConfig:
    """Everything the thumbnailer needs from settings, already validated."""

    render: pipeline.RenderSettings = field(default_factory=pipeline.RenderSettings)
    presets: Mapping[str, str] = field(default_factory=dict)
    allow_unsigned: bool = False
    auto_format: bool = True
    max_src_resolution: int = 50_000_000
    max_src_file_size: int = 50 * 1024 * 1024
    render_timeout: float = 10.0
    #: How long a request waits for a peer process's render of the same key.
    peer_wait: float = 15.0
    cache_control: str = "public, max-age=31536000, immutable"
    #: Whether ``/metrics`` answers (it also needs prometheus-client installed).
    metrics: bool = True


@dataclass(frozen=True)
class Job:
    """A verified, parsed request with its output format and cache key."""

    source_alias: str
    source_name: str
    options: Options
    format: str
    negotiated: bool
    key: str

    @property
    def etag(self) -> str:
        return '"' + posixpath.splitext(posixpath.basename(self.key))[0] + '"'


class Thumbnailer:
    """Serves thumbnail requests for one process (thread-safe)."""

    def __init__(
        self,
        config: ThumbnailerConfig,
        signer: URLSigner,
        sources: Mapping[str, SourceStore],
        cache: CacheStore,
        executor: Executor,
        clock: Callable[[], float] = time.time,
        coordinator: Coordinator | None = None,
    ) -> None:
        if "" not in sources:
            raise ValueError("sources needs a default store under the alias ''")
        self.config = config
        self.signer = signer
        self.sources = sources
        self.cache = cache
        self.executor = executor
        self.flights = SingleFlight()
        #: Different sizes of one source read at the same time share the read and
        #: probe (remote sources: every request in flight; local ones: the renders
        #: running together, as they are read on the workers).
        self.source_reads = SingleFlight()
        self.coordinator: Coordinator = coordinator or LocalCoordinator()
        self.clock = clock
        self.renders = 0
        self.source_loads = 0
        self.peer_results = 0
        self._version = cache_version(config.render)
        # -inf, not 0: time.monotonic() may be below the interval just after boot.
        self._last_cache_error = float("-inf")
        self._lock = threading.Lock()
        self.metrics = metrics.recorder_for(config.metrics, self.counts, executor)

    # -- the public entry point --------------------------------------------------

    def reply(self, path: str, method: str, request_headers: Mapping[str, str]) -> responders.Reply:
        """Answer one request for ``path`` (raw, still percent-encoded, from the signature on).

        ``/health`` and ``/metrics`` exactly are the operational endpoints; a
        thumbnail path always has more segments, so the two never clash.
        ``/info/...`` asks for a source's info (:meth:`info_reply`), as in
        imgproxy (a thumbnail signature can only read "info" with a 3-byte
        ``SIGNATURE_SIZE``, a 1 in 2**24 chance; that URL is then refused).
        """
        if path in metrics.ENDPOINTS:
            return metrics.endpoint_reply(
                path,
                method,
                request_headers.get("HTTP_ACCEPT", ""),
                self.metrics,
                lambda: metrics.health_problems(self.executor, self.cache),
            )
        try:
            if info_endpoint.is_info_path(path):
                answer = self.info_reply(path, method, request_headers)
            else:
                answer = self.thumbnail_reply(path, method, request_headers)
        except Exception:  # not swallowed: the server turns it into a 500, counted here
            self.metrics.count_request(500)
            raise
        self.metrics.count_request(answer.status)
        return answer

    def counts(self) -> metrics.Counts:
        """This thumbnailer's counters as one snapshot (read when metrics are scraped)."""
        coalesced = self.flights.stats().coalesced
        with self._lock:
            return metrics.Counts(self.renders, self.source_loads, coalesced, self.peer_results)

    # -- steps ------------------------------------------------------------------

    def thumbnail_reply(
        self, path: str, method: str, request_headers: Mapping[str, str]
    ) -> responders.Reply:
        """Answer a thumbnail request: the result, or the error that stopped it."""

        def result() -> responders.Result:
            return self.result_for(self.job_for(path, request_headers.get("HTTP_ACCEPT", "")))

        return self._answer(path, method, request_headers, result)

    def _answer(
        self,
        path: str,
        method: str,
        request_headers: Mapping[str, str],
        result: Callable[[], responders.Result],
    ) -> responders.Reply:
        """The reply for ``result()``, or for the project error it raised (logged)."""
        if method not in responders.METHODS:
            return responders.method_not_allowed()
        try:
            return responders.result_reply(
                result(), method, request_headers, self.config.cache_control
            )
        except errors.OximgError as error:
            level = logging.WARNING if responders.status_for(error) >= 500 else logging.INFO
            logger.log(level, "%s %s: %s", type(error).__name__, path[:200], error.detail)
            return responders.error_reply(error, method)

    def job_for(self, path: str, accept: str) -> Job:
        """Verify and parse ``path`` into a :class:`Job`; no storage is touched."""
        signature, rest = split_signed_path(path)
        if self.config.allow_unsigned and signature in ("insecure", "unsafe"):
            pass
        else:
            self.signer.verify(signature, rest)
        parsed = parse_path(rest, self.config.presets)
        options = parsed.options
        if options.expires and options.expires < self.clock():
            raise errors.ExpiredURL(f"expired at {options.expires}")
        alias, name = self.split_source(parsed.source)
        fmt, negotiated = self.output_format(options, name, accept)
        canonical = build_path(replace(options, format=fmt), parsed.source)
        key = self.cache_key(parsed.source, canonical, fmt)
        return Job(alias, name, options, fmt, negotiated, key)

    def split_source(self, source: str) -> tuple[str, str]:
        """Split ``alias:name`` into a configured source alias and a name.

        A URL (``scheme://...``) goes whole to the HTTP store, which checks it
        against its allowlist; without one (``HTTP_SOURCES`` empty) it is a 404.
        """
        if is_url(source):
            if URL_ALIAS in self.sources:
                return URL_ALIAS, source
            raise errors.SourceNotFound("URL sources are off (OXIMG['HTTP_SOURCES'] is empty)")
        alias, sep, name = source.partition(":")
        if sep and alias and alias != URL_ALIAS and alias in self.sources:
            return alias, name
        return "", source

    def output_format(self, options: Options, name: str, accept: str) -> tuple[str, bool]:
        """The output format and whether it was negotiated from Accept."""
        if options.format:
            return options.format, False
        fallback = FALLBACK_FORMATS.get(posixpath.splitext(name)[1].lower(), "jpeg")
        if not self.config.auto_format:
            return fallback, False
        return negotiate(accept, fallback), True

    def cache_key(self, source: str, canonical: str, fmt: str) -> str:
        """Key under the source's own directory, so one source's variants purge together.

        Made from the canonical request (never the raw URL), the pipeline
        version and the libvips version.
        """
        return f"{source_directory(source)}/{sha256_hex(self._version, canonical)[:40]}.{fmt}"

    def result_for(self, job: Job) -> responders.Result:
        """The cached result, or a fresh render shared by concurrent identical requests."""
        content_type = pipeline.CONTENT_TYPES[job.format]
        cached = self.cache.get(job.key)
        self.metrics.count_cache_lookup(hit=cached is not None)
        if cached is not None:
            return self._from_cache(job, cached, content_type)
        result, _shared = self.flights.do(job.key, lambda: self._cached_or_rendered(job))
        return result

    def _cached_or_rendered(self, job: Job) -> responders.Result:
        """Run once per key in flight: look in the cache again, render only on a miss.

        A request that missed the cache just before another request's flight
        ended becomes a new leader; the second look finds that result, so it is
        not rendered twice.
        """
        content_type = pipeline.CONTENT_TYPES[job.format]
        lease_ttl = self.config.peer_wait + LEASE_MARGIN
        give_up = time.monotonic() + self.config.peer_wait
        pause = PEER_POLL_FIRST
        waited = False
        while True:
            cached = self.cache.get(job.key)
            if cached is not None:
                if waited:
                    with self._lock:
                        self.peer_results += 1
                return self._from_cache(job, cached.in_memory(), content_type)
            if self.coordinator.acquire(job.key, lease_ttl):
                try:
                    return self._render_result(job, content_type, look_again=waited)
                finally:
                    self.coordinator.release(job.key)
            # Another process holds the lease: its result will be in the cache.
            if time.monotonic() >= give_up:
                # The holder is stuck or was killed: render ourselves rather than fail.
                logger.warning("no result from the lease holder of %s; rendering here", job.key)
                return self._render_result(job, content_type, look_again=False)
            time.sleep(pause)
            pause = min(pause * 2, PEER_POLL_MAX)
            waited = True

    def _render_result(self, job: Job, content_type: str, look_again: bool) -> responders.Result:
        if look_again:  # a peer may have finished between our last look and our lease
            cached = self.cache.get(job.key)
            if cached is not None:
                return self._from_cache(job, cached.in_memory(), content_type)
        rendered = self.produce(job)
        return responders.Result(
            content_type, job.etag, job.negotiated, data=rendered.data, size=len(rendered.data)
        )

    def _from_cache(self, job: Job, cached: CachedResult, content_type: str) -> responders.Result:
        """A reply's result from a cache hit.

        Hits found inside a flight are shared by its followers, so their
        callers pass ``cached.in_memory()``: a remote store's stream can be
        sent once only.
        """
        return responders.Result(
            content_type,
            job.etag,
            job.negotiated,
            data=cached.data,
            path=cached.path,
            size=cached.size,
            stream=cached.stream,
            url=cached.url,
        )

    def produce(self, job: Job) -> pipeline.Rendered:
        """Read, check, render within budget and deadline, then cache the result.

        A local source is read on the executor's worker once the job's turn
        has come (a staged job), so requests waiting in the queue hold no
        source bytes and the memory budget really bounds the process. A
        remote one (S3, HTTP: no ``read_on_worker``) is read here, on the
        request thread, so a network wait never holds a render slot; the
        queue is checked first, so a refused request reads nothing.
        """
        if getattr(self.sources[job.source_alias], "read_on_worker", False):
            rendered = self.executor.run_staged(lambda: self.prepare_render(job))
        else:
            self.executor.check_capacity()
            cost, render = self.prepare_render(job)
            rendered = self.executor.run(render, cost=cost)
        with self._lock:
            self.renders += 1
        self.store_result(job.key, rendered.data)
        return rendered

    def prepare_render(self, job: Job) -> tuple[int, Callable[[], pipeline.Rendered]]:
        """Read and check the source; return the render's memory estimate and the render.

        The render is planned once, here: the estimate and the render share the plan.
        """
        data, info = self.source_reads.do(
            f"{job.source_alias}:{job.source_name}", lambda: self.load_source(job)
        )[0]
        frames = self.frames_to_render(info, job.format)
        self.check_resolution(info, frames)
        plan = pipeline.plan_render(info, job.options, job.format, self.config.render)
        cost = estimate_peak_bytes(plan, frames, data)

        def render() -> pipeline.Rendered:
            started = time.monotonic()
            deadline = started + self.config.render_timeout
            try:
                return pipeline.render(
                    data, job.options, job.format, self.config.render, deadline=deadline, plan=plan
                )
            finally:  # failed and killed renders took their time too
                self.metrics.observe_render(time.monotonic() - started)

        return cost, render

    def load_source(self, job: Job) -> tuple[bytes, pipeline.SourceInfo]:
        """Read the source and its header (shared by concurrent jobs on one source)."""
        store = self.sources[job.source_alias]
        data = store.read(job.source_name, self.config.max_src_file_size)
        info = pipeline.probe(data)
        with self._lock:
            self.source_loads += 1
        return data, info

    def frames_to_render(self, info: pipeline.SourceInfo, fmt: str) -> int:
        if fmt in ANIMATED_FORMATS and 1 < info.frames <= self.config.render.max_animation_frames:
            return info.frames
        return 1

    def check_resolution(self, info: pipeline.SourceInfo, frames: int) -> None:
        pixels = info.width * info.height * frames
        if pixels > self.config.max_src_resolution:
            raise errors.SourceTooLarge(
                f"{info.width}x{info.height}x{frames} px exceeds {self.config.max_src_resolution}"
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

    # -- /info ------------------------------------------------------------------

    def info_reply(
        self, path: str, method: str, request_headers: Mapping[str, str]
    ) -> responders.Reply:
        """Answer ``/info/<signature>/...`` with the source's info as JSON (core/info.py).

        Cached, validated and answered like a thumbnail: the same result
        cache (under the source's directory, so a purge removes it), ETag,
        304, Cache-Control and error statuses.
        """

        def result() -> responders.Result:
            request, job = self.info_job_for(path)
            return self.info_result_for(job, request)

        return self._answer(path, method, request_headers, result)

    def info_job_for(self, path: str) -> tuple[info_endpoint.InfoRequest, Job]:
        """Verify and parse an info path; the job's key ends in ``.json``. No I/O."""
        signature, rest = split_signed_path(info_endpoint.signed_part(path))
        if not (self.config.allow_unsigned and signature in ("insecure", "unsafe")):
            self.signer.verify(signature, rest)
        request = info_endpoint.parse_info_path(rest)
        if request.expires and request.expires < self.clock():
            raise errors.ExpiredURL(f"expired at {request.expires}")
        alias, name = self.split_source(request.source)
        digest = sha256_hex(self._version, request.canonical())[:40]
        key = f"{source_directory(request.source)}/{digest}.json"
        return request, Job(alias, name, Options(), "json", False, key)

    def info_result_for(self, job: Job, request: info_endpoint.InfoRequest) -> responders.Result:
        """The cached document, or a fresh one shared by concurrent identical requests."""
        cached = self.cache.get(job.key)
        self.metrics.count_cache_lookup(hit=cached is not None)
        if cached is not None:
            return self._from_cache(job, cached, info_endpoint.CONTENT_TYPE)
        result, _shared = self.flights.do(job.key, lambda: self._info_cached_or_made(job, request))
        return result

    def _info_cached_or_made(
        self, job: Job, request: info_endpoint.InfoRequest
    ) -> responders.Result:
        cached = self.cache.get(job.key)
        if cached is not None:
            return self._from_cache(job, cached.in_memory(), info_endpoint.CONTENT_TYPE)
        document = self.produce_info(job, request)
        return responders.Result(
            info_endpoint.CONTENT_TYPE, job.etag, False, data=document, size=len(document)
        )

    def produce_info(self, job: Job, request: info_endpoint.InfoRequest) -> bytes:
        """Read the source, summarise it if asked (on the executor), cache the JSON.

        The header answers everything but the BlurHash and dominant colour;
        those come from a tiny shrink-on-load thumbnail, admitted with its
        own (small) memory estimate and the render deadline.
        """
        self.executor.check_capacity()  # shed load before reading the source
        data, info = self.source_reads.do(
            f"{job.source_alias}:{job.source_name}", lambda: self.load_source(job)
        )[0]
        summary = None
        if request.needs_pixels:
            self.check_resolution(info, 1)
            cost = estimate_peak_bytes(pipeline.summary_plan(info, self.config.render), 1, data)

            def summarise() -> pipeline.Summary:
                deadline = time.monotonic() + self.config.render_timeout
                return pipeline.summarise(
                    data, request.blurhash, request.dominant_color, deadline=deadline
                )

            summary = self.executor.run(summarise, cost=cost)
        document = info_endpoint.info_document(info, len(data), summary)
        self.store_result(job.key, document)
        return document


def cache_version(render: pipeline.RenderSettings) -> str:
    """The part of every cache key that changes when output bytes would.

    A JPEG decode margin other than libvips' own changes the bytes of JPEG
    sources, so it is part of the key (keys made with the default stay as
    they were).
    """
    version = f"{PIPELINE_VERSION}:{pipeline.libvips_version()}"
    if render.jpeg_shrink_margin != pipeline.LIBVIPS_SHRINK_MARGIN:
        version += f":m{render.jpeg_shrink_margin:g}"
    return version


def sha256_hex(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def source_directory(source: str) -> str:
    """The cache directory holding every variant of ``source``."""
    source_hash = sha256_hex(source)[:32]
    return f"{source_hash[:2]}/{source_hash}"


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


def negotiate(accept: str, fallback: str) -> str:
    """AVIF if the client accepts it, then WebP, then ``fallback``.

    Only explicit ``image/avif`` / ``image/webp`` entries count (``*/*`` does
    not: every browser sends it, including ones that cannot decode AVIF).
    """
    accepted = accepted_types(accept)
    if "image/avif" in accepted:
        return "avif"
    if "image/webp" in accepted:
        return "webp"
    return fallback
