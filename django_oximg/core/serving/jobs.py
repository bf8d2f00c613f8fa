"""A request's path into a :class:`Job`: verified, parsed, resolved, and named by its cache key.

Step 3 of a request (the map: :mod:`django_oximg.core.serving`).

Nothing here touches a storage: the signature is checked (403), the options
parsed (400), ``expires`` checked (404), the source resolved to its store,
which checks the name without I/O (404), the output format chosen
(:mod:`~django_oximg.core.serving.negotiation`) and the cache key computed from the
*canonical* request (:mod:`~django_oximg.core.keys`), so that every URL
meaning the same answer names one cache object. Thumbnails and ``/info``
documents differ only in how their path is parsed and in what the job
makes (:class:`~django_oximg.core.serving.staging.RenderWork`,
:class:`~django_oximg.core.serving.staging.InfoWork`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

from django_oximg.core import errors, keys
from django_oximg.core.options import (
    BEST_FORMAT,
    Extension,
    Options,
    URLRules,
    build_path,
    parse_path,
)
from django_oximg.core.options.autoquality import (
    AUTOQUALITY_OFF,
    SEARCHED_FORMATS,
    AutoQualitySettings,
    best_target,
    quality_target,
)
from django_oximg.core.options.signing import URLSigner, verified_rest
from django_oximg.core.serving import info as info_endpoint
from django_oximg.core.serving import replies
from django_oximg.core.serving.client_hints import NO_HINTS, ClientHints, with_hints
from django_oximg.core.serving.negotiation import VARY_ACCEPT, best_formats, output_format
from django_oximg.core.serving.staging import InfoWork, RenderWork
from django_oximg.core.stores.protocols import CachedResult
from django_oximg.core.stores.resolver import Resolved, SourceResolver


class Job(NamedTuple):
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
    #: Whether ``autoquality`` may search the answer's quality: only then is
    #: its quality sidecar read on a hit (:mod:`~django_oximg.core.serving.lookup`).
    searched: bool = False

    @property
    def etag(self) -> str:
        return keys.etag(self.key)

    @property
    def needs_worker(self) -> bool:
        """Whether making the answer decodes pixels (an ``/info`` from the header does not)."""
        return self.work.needs_worker

    @property
    def content_type(self) -> str:
        return keys.content_type(self.key)

    def result(self, found: CachedResult) -> replies.Result:
        """This request's answer with ``found``'s content.

        Built per request, never shared: requests that share one cache
        object or one render may still differ in their ``Vary``. A
        ``format:best`` answer's type is read from its first bytes (a
        stream is read whole for it: thumbnails are small).
        """
        content_type = self.content_type
        if keys.is_best_key(self.key):
            if found.stream is not None:
                found = found.in_memory()
            content_type = keys.sniffed_content_type(result_head(found))
        return replies.Result(
            content_type,
            self.etag,
            self.vary,
            data=found.data,
            path=found.path,
            size=found.size,
            stream=found.stream,
            url=found.url,
            disposition=self.disposition,
            quality=found.quality,
        )


def result_head(found: CachedResult) -> bytes:
    """The first bytes of ``found`` (its data or its file; none for a URL alone)."""
    try:
        return found.head(keys.SNIFF_BYTES)
    except OSError:  # gone since the lookup: the reply finds out too
        return b""


class JobReader(NamedTuple):
    """Reads request paths into jobs for one thumbnailer (thread-safe: it holds no state)."""

    signer: URLSigner
    sources: SourceResolver
    #: :func:`~django_oximg.core.keys.cache_version`: part of every cache key.
    version: str
    #: Unix time now (``expires`` is checked against it).
    clock: Callable[[], float]
    presets: Mapping[str, str]
    #: What URLs may say (``ALLOWED_PROCESSING_OPTIONS``, ``ONLY_PRESETS``).
    rules: URLRules
    #: The site's own options (``EXTENSIONS``), which URLs and presets may use.
    extensions: tuple[Extension, ...]
    allow_unsigned: bool
    #: Whether a URL without a format negotiates one from ``Accept``.
    auto_format: bool
    #: Whether a URL without a format is ``format:best`` (``FORMAT_BEST_BY_DEFAULT``).
    best_by_default: bool
    #: Whether ``DPR``/``Width`` client hints fill in ``dpr``/``width``.
    client_hints: bool
    #: Whether a watermark image is configured (``WATERMARK``).
    watermark: bool
    #: ``MAX_RESULT_DIMENSION``: no client hint asks for a wider result.
    max_result_dimension: int
    #: The site's ``AUTOQUALITY`` (whether a URL's quality is searched).
    autoquality: AutoQualitySettings = AUTOQUALITY_OFF

    def job_for(self, path: str, accept: str, hints: ClientHints = NO_HINTS) -> Job:
        """Verify and parse ``path`` into a :class:`Job`. No storage is touched.

        The source is resolved here, before any cache lookup, so a source the
        configuration no longer allows (a host removed from ``HTTP_SOURCES``)
        is refused rather than served from the cache. ``hints`` are the
        request's client hints (only read with ``client_hints`` on).
        """
        if info_endpoint.is_info_path(path):
            return self.info_job(info_endpoint.signed_part(path))
        rest = verified_rest(path, self.signer, self.allow_unsigned)
        parsed = parse_path(rest, self.presets, self.rules, self.extensions)
        options, hinted = parsed.options, tuple[str, ...]()
        if self.client_hints:
            options, hinted = with_hints(parsed, hints, self.max_result_dimension)
        self.check_expiry(options.expires)
        if options.watermark.opacity and not self.watermark:
            raise errors.InvalidOptions(
                detail="watermark: OXIMG['WATERMARK'] is not set", public="Invalid watermark"
            )
        source = self.sources.resolve(parsed.source)
        fmt, negotiated = output_format(
            options, source.name, accept, self.auto_format, self.best_by_default
        )
        # The canonical request: what decides the bytes. ``expires`` decides
        # only whether there is an answer, so URLs that differ in it share one.
        canonical = build_path(options._replace(format=fmt, expires=0), parsed.source)
        accepted: tuple[str, ...] = ()
        if fmt == BEST_FORMAT:
            # The formats best may choose decide the bytes too: one object per class.
            accepted = best_formats(accept, self.auto_format)
            canonical += "\nbest:" + ":".join(accepted)
        key = keys.result_key(parsed.source, canonical, self.version, fmt)
        vary = (VARY_ACCEPT if negotiated else ()) + hinted
        disposition = ""
        if options.filename or options.return_attachment:
            disposition = replies.content_disposition(
                parsed.source, options.filename, fmt, attachment=options.return_attachment
            )
        work = RenderWork(options, fmt, accepted)
        return Job(
            source, work, key, vary, options.expires, disposition, self.searches(options, fmt)
        )

    def searches(self, options: Options, fmt: str) -> bool:
        """Whether ``autoquality`` may search the quality of ``options``' answer in ``fmt``.

        From the options and settings alone, as the plan decides it, but for
        what only the source tells (an animation, a result over
        ``max_resolution``): those answers have no sidecar, and their hits
        find none. ``format:best`` searches only for DSSIM (a byte target
        leaves its candidates at their fixed qualities); ``raw`` encodes
        nothing.
        """
        if options.raw:
            return False
        if fmt == BEST_FORMAT:
            return any(
                best_target(options, lossy, self.autoquality, 0) is not None
                for lossy in SEARCHED_FORMATS
            )
        return quality_target(options, fmt, self.autoquality, 0) is not None

    def info_job(self, signed: str) -> Job:
        """An ``/info`` path (after ``/info``) into its job."""
        rest = verified_rest(signed, self.signer, self.allow_unsigned)
        request = info_endpoint.parse_info_path(rest)
        self.check_expiry(request.expires)
        source = self.sources.resolve(request.source)
        key = keys.result_key(request.source, request.canonical(), self.version, "json")
        return Job(source, InfoWork(request), key, (), request.expires)

    def check_expiry(self, expires: int) -> None:
        if expires and expires < self.clock():
            raise errors.ExpiredURL(f"expired at {expires}")
