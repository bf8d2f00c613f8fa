"""The one place ``settings.OXIMG`` is read, validated and defaulted.

Everything else asks :func:`get_settings` for a frozen :class:`OximgSettings`.
It is computed on first use (never at import time) and dropped when a test
changes settings (``setting_changed``), so nothing captures stale values.

The docstring of each field below is the settings reference: the docs page is
generated from it (``docs/settings.md``, ``python -m django_oximg.settings_reference``).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.crypto import salted_hmac

from django_oximg import setting_values
from django_oximg.core import defaults
from django_oximg.core.errors import InvalidOptions
from django_oximg.core.keys import output_fingerprint as output_fingerprint_of
from django_oximg.core.options import OPTION_NAMES, OUTPUT_FORMATS, Extension, parse_path
from django_oximg.core.options.autoquality import AUTOQUALITY_OFF, AutoQualitySettings
from django_oximg.core.options.signing import pairs_from_hex
from django_oximg.setting_values import check_type


@dataclass(frozen=True)
class OximgSettings:
    """django-oximg's settings: the keys of the ``OXIMG`` dict in settings.py."""

    KEY: tuple[str, ...] = ()
    """Hex-encoded HMAC key, or a list of keys for rotation (the first signs,
    all verify). Empty: a key is derived from ``SECRET_KEY``, so signing is on
    without configuration. Set it explicitly to share URLs with imgproxy
    tools or with other sites."""

    SALT: tuple[str, ...] = ()
    """Hex-encoded salt, or a list paired one-to-one with ``KEY``."""

    SIGNATURE_SIZE: int = 32
    """Bytes of the HMAC digest kept in the signature (1..32), as imgproxy's
    ``IMGPROXY_SIGNATURE_SIZE``."""

    ALLOW_UNSIGNED: bool = defaults.ALLOW_UNSIGNED
    """Accept ``insecure``/``unsafe`` in place of a signature. For local
    experiments only: anyone could then make the server render anything.
    A system check warns when it is on."""

    URL_PREFIX: str = "/img/"
    """Where the WSGI middleware answers, and the prefix the template tag uses
    when the URLconf is not mounted (when it is, its mount point wins)."""

    SOURCE_STORAGE: str = "default"
    """Alias in ``STORAGES`` holding the source images."""

    SOURCES: Mapping[str, str] = field(default_factory=dict)
    """More named sources: ``{"archive": "s3photos"}`` makes
    ``plain/archive:path/x.jpg`` read ``path/x.jpg`` from the ``s3photos``
    storage. An alias may hold letters, digits, ``_``, ``.`` and ``-``, and
    may not be ``http`` or ``https`` (``http://...`` is a URL source)."""

    HTTP_SOURCES: tuple[str, ...] = ()
    """URL prefixes from which sources may be fetched over HTTP(S), e.g.
    ``["https://images.example.com/photos/"]``. Empty (the default): URL
    sources are a 404. A URL is allowed when its scheme, host, port and path
    (at a ``/`` boundary) match a prefix once parsed; URLs with userinfo,
    fragments or backslashes never are, and nothing is fetched from loopback,
    private, link-local or other non-public addresses (checked on every
    resolved address and every redirect). See docs/http_sources.md."""

    HTTP_TIMEOUT: float = defaults.HTTP_TIMEOUT
    """Seconds a whole HTTP source download may take: connecting, redirects,
    headers and body (504 after it)."""

    SOURCE_READS: int = 0
    """Reads of sources that are not on local disk (HTTP sources, S3, any
    other Django storage) running at once in a process. A request that finds
    none free waits for one, within ``QUEUE_TIMEOUT`` (503 after). The bytes
    being read count against ``MEMORY_BUDGET`` as they arrive. 0:
    ``WORKERS`` x 2. See docs/security.md (remote sources)."""

    SOURCE_TIMEOUT: float = defaults.SOURCE_TIMEOUT
    """Seconds a read of a source that is not on local disk may take (504
    after). HTTP sources stop themselves at ``HTTP_TIMEOUT``; this bounds
    what nothing else does: a Django storage, or a DNS lookup, that never
    answers. A read that hangs keeps its ``SOURCE_READS`` slot until it
    returns, so hung reads cannot pile up; ``/health`` reports the process
    degraded once they hold every slot. Local disk is not covered: bound it
    with the mount's own options (``/health`` reports render workers that
    hang there too)."""

    HTTP_MAX_REDIRECTS: int = defaults.HTTP_MAX_REDIRECTS
    """Redirects followed for an HTTP source; one more is a 404. Each new
    location is checked against ``HTTP_SOURCES`` and the address guard."""

    HTTP_ALLOW_PRIVATE_NETWORKS: bool = defaults.HTTP_ALLOW_PRIVATE_NETWORKS
    """Allow HTTP sources on loopback, private (10/8, 172.16/12, 192.168/16,
    100.64/10, fc00::/7), link-local and reserved addresses. Off, these are
    refused whatever ``HTTP_SOURCES`` says, which is what stops a URL from
    reaching internal services (SSRF). Turn on only when the image server is
    on your own network and ``HTTP_SOURCES`` names it exactly."""

    CACHE_STORAGE: str = ""
    """Alias in ``STORAGES`` for the result cache. Empty: a
    ``FileSystemStorage`` under ``MEDIA_ROOT/oximg``."""

    CACHE_STORAGE_TIMEOUT: float = defaults.CACHE_STORAGE_TIMEOUT
    """Seconds a call to an S3 result cache may take: a lookup, a write. A
    lookup that takes longer is a miss (the result is rendered), a write
    that takes longer is given up (the result is served from memory), and
    either shows in ``/health`` until one works again. One attempt each, no
    retries: both are survived, so a retry would only hold the request
    longer. Other storages are bounded by their own clients' settings; a
    local disk needs none. Part of the longest a request can take
    (docs/deployment.md, timeouts)."""

    CACHE_FSYNC: bool = True
    """fsync each result on a local-disk cache before renaming it into place,
    so that a power cut cannot leave a torn or empty file under a final name
    (served for a year under ``CACHE_CONTROL``). Turn off only when the cache
    directory does not outlive a crash (tmpfs, or emptied at boot): the write
    stays atomic for readers either way. Other storages write as they do.
    Its cost is measured in docs/BENCHMARKS.md."""

    CACHE_REDIRECT: bool = False
    """On a hit in an S3 result cache, answer ``302`` to the object's own
    URL (``storage.url()``: presigned, or on ``custom_domain``) instead of
    streaming its bytes through this process. The lookup is then a HEAD
    request; the redirect itself is ``Cache-Control: no-store`` (a presigned
    URL expires), while the object carries ``CACHE_CONTROL``. Off: hits are
    streamed from S3 to the client. Local-disk caches are always served
    directly (sendfile). See docs/storages.md."""

    HIT_CACHE_BYTES: int = defaults.HIT_CACHE_BYTES
    """Bytes of memory per process for answering repeated hits on a
    local-disk result cache without looking them up again: the URLs hit
    most recently, their headers and (for results up to 1/32 of this) their
    bytes, so a hit costs a dictionary lookup and a ``stat``. Every answer is
    the one the cache lookup would give; a file purged, cleaned or rendered
    again is looked up afresh. 0 turns it off. See docs/operations.md."""

    WORKERS: int = 0
    """Render threads per process. 0: the CPUs this process may use
    (affinity and cgroup quota)."""

    QUEUE_SIZE: int = 0
    """Jobs allowed to wait for a worker; one more is answered 429.
    0: ``WORKERS`` x 16."""

    QUEUE_TIMEOUT: float = defaults.QUEUE_TIMEOUT
    """Seconds a job may wait for a worker and memory before a 503."""

    RENDER_TIMEOUT: float = defaults.RENDER_TIMEOUT
    """Seconds a render may run before it is stopped (503). libvips stops at
    its kill flag; AVIF and GIF encoders cannot be stopped that way, so a
    render whose encoder may run long runs in a child process that is killed
    instead, and one whose encoder is predicted to outlast this alone is
    refused up front (422). See docs/security.md (render deadline)."""

    MEMORY_BUDGET: int = 0
    """Bytes of estimated peak render memory per process. 0: the smaller of
    512 MiB and a quarter of the cgroup memory limit. Renders ahead count
    against it as requests do, in the process that runs the task; a size
    over it alone is refused there as its request is (docs/render-ahead.md)."""

    MAX_SRC_RESOLUTION: int = defaults.MAX_SRC_RESOLUTION
    """Largest source in pixels, all rendered frames summed (422 above)."""

    MAX_SRC_FILE_SIZE: int = defaults.MAX_SRC_FILE_SIZE
    """Largest source in bytes (422 above)."""

    MAX_ANIMATION_FRAMES: int = defaults.MAX_ANIMATION_FRAMES
    """Animations with more frames are rendered as their first frame only."""

    MAX_RESULT_DIMENSION: int = defaults.MAX_RESULT_DIMENSION
    """Largest output width or height; larger requests are clamped."""

    QUALITY: Mapping[str, int] = field(default_factory=lambda: dict(defaults.QUALITY))
    """Default encoder quality per output format (merged over the defaults)."""

    AUTO_FORMAT: bool = defaults.AUTO_FORMAT
    """When a URL names no format, choose AVIF or WebP from the request's
    ``Accept`` header (and send ``Vary: Accept``). Off: the source's format."""

    FORMAT_BEST_BY_DEFAULT: bool = defaults.FORMAT_BEST_BY_DEFAULT
    """A URL that names no format is ``format:best`` (imgproxy's
    ``BEST_FORMAT_BY_DEFAULT``): each thumbnail encoded in every format the
    client accepts, the smallest kept. Costs 2-5 encodes per miss, up to 13
    with a DSSIM ``AUTOQUALITY`` (docs/quality.md): suits render ahead and
    ``oximg_warm``."""

    FORMAT_BEST_COMPLEXITY_THRESHOLD: float = defaults.FORMAT_BEST_COMPLEXITY_THRESHOLD
    """``format:best`` also tries palette PNG and lossless WebP for a thumbnail
    with fewer than this per cent of its pixels on an edge (0 to 100; flat
    graphics: logos, text, screenshots). imgproxy's
    ``BEST_FORMAT_COMPLEXITY_THRESHOLD`` is on a scale of its own."""

    FORMAT_BEST_MAX_RESOLUTION: float = defaults.FORMAT_BEST_MAX_RESOLUTION
    """Megapixels (imgproxy's ``BEST_FORMAT_MAX_RESOLUTION``): ``format:best``
    encodes a larger result once, in the format that usually wins (WebP when
    accepted; lossless WebP or palette PNG for flat graphics), instead of
    trying every format. 0: no limit."""

    FORMAT_BEST_ALLOW_SKIPS: bool = defaults.FORMAT_BEST_ALLOW_SKIPS
    """imgproxy's ``BEST_FORMAT_ALLOW_SKIPS``: ``format:best`` serves a source
    whose format ``skip_processing`` lists as it is (when the client may
    get that format). Off: ``best`` always renders."""

    PRESETS: Mapping[str, str] = field(default_factory=dict)
    """Named option sets, e.g. ``{"card": "rs:fill:400:300/q:70"}``, used as
    ``pr:card`` in URLs or ``preset="card"`` in the tag. A preset named
    ``default`` applies to every request. Every preset is parsed at start-up;
    an empty name or a value without an option is refused, as imgproxy does."""

    SRCSET_WIDTHS: Mapping[str, tuple[int, ...]] = field(
        default_factory=lambda: {"default": (320, 640, 960, 1280, 1920)}
    )
    """Named lists of image widths (pixels) for ``{% thumbnail_srcset %}`` and
    ``{% picture %}``: ``widths="cards"`` takes ``SRCSET_WIDTHS["cards"]``, and
    a tag without ``widths`` takes ``default``. Merged over the default, e.g.
    ``{"cards": [240, 480, 720]}``. A width is a wish: a candidate is never
    wider than the source allows (unless ``upscale``), and widths that come out
    the same are listed once. Names are letters, digits, ``_`` and ``-``, not
    starting with a digit (a digit starts a literal list such as
    ``widths="320,640"``)."""

    CACHE_CONTROL: str = defaults.CACHE_CONTROL
    """Cache-Control of successful responses. A signed URL's bytes never
    change (a changed source gets a new URL), so forever is safe."""

    FALLBACK_IMAGE_PATH: str = ""
    """A file on this machine (a path, ``str`` or ``Path``) answered, as it
    is, for a thumbnail whose source fails when it is read: not found, not
    an image, a format not read, over a limit. Like imgproxy's
    ``IMGPROXY_FALLBACK_IMAGE_PATH``; read once when the server starts (and
    by the system check ``oximg.E040``, which names a file it cannot read). Not
    resized: it costs no worker and cannot fail, and the tags' ``width`` and
    ``height`` scale it in the page. A URL refused before its source is read
    (signature, options, an expired URL, a source not allowed) keeps its
    error. Empty (the default): the error itself. See docs/security.md."""

    FALLBACK_IMAGE_DATA: str = ""
    """The fallback image as base64 text, in place of ``FALLBACK_IMAGE_PATH``
    (set one of them, not both)."""

    FALLBACK_IMAGE_HTTP_CODE: int = 200
    """The status of a fallback answer (200..599). With an error status it
    is sent with ``no-store``, as every error is."""

    FALLBACK_IMAGE_TTL: int = 60
    """Seconds a fallback answered with a success status may be kept
    (``max-age``), so a source put right is soon seen; 0: ``no-store``. It
    is never written to the result cache."""

    LIBVIPS_CONCURRENCY: int = 1
    """libvips threads per render. 1 with ``WORKERS`` = CPUs keeps every core
    busy on separate requests without oversubscription; see docs/operations.md."""

    MALLOC_THRESHOLD: int = 8 * 1024 * 1024
    """glibc's malloc thresholds, in bytes: freed blocks up to this size stay
    in the process for the next render, rather than going back to the
    kernel to be faulted in again, page by page, at the next decode; larger
    ones go back as soon as they are freed (glibc would otherwise raise its
    threshold to 32 MiB after the first large block, and keep those). The
    default takes most page faults off a medium miss under load and lowers
    what a process keeps after large renders. 0 leaves glibc's defaults.
    Ignored off glibc, and when the process started with
    ``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``,
    ``MALLOC_TOP_PAD_`` or glibc malloc tunables set. Measured in
    docs/BENCHMARKS.md."""

    JPEG_SHRINK_MARGIN: float = defaults.JPEG_SHRINK_MARGIN
    """How much larger than the thumbnail a JPEG is decoded, at least, before
    the final resize (1 to 8). JPEG decoders can scale by 1/2, 1/4 or 1/8 as
    they decode; the smallest scale leaving this margin is used. The default
    1.5 decodes a 2560 px photo at 1/2 for a 500 px thumbnail, as libvips'
    own ``thumbnail`` does, and scores like it at equal bytes; 1 decodes as
    close to the thumbnail as the DCT allows (imgproxy's rule, and Pillow's
    draft mode): about 10-16 % less CPU per render, 5-6 % more bytes for the
    same look. 2 is libvips' rule, which decodes a 1920 px photo whole for a
    500 px thumbnail for no visible gain. docs/pipeline.md and
    docs/quality.md measure each value. Changing it gives new cache keys and
    tag URLs."""

    JPEG_PROGRESSIVE: bool = defaults.JPEG_PROGRESSIVE
    """Write JPEG results progressive (as imgproxy's ``IMGPROXY_JPEG_PROGRESSIVE``,
    sorl-thumbnail's default, and Wagtail's renditions) instead of baseline.
    A progressive JPEG shows a coarse whole at once and sharpens as it
    arrives; it decodes to the same pixels. On generated photos at quality
    85 it is as large as baseline at 1200 px wide, 1-4 % larger from 200 to
    640 px and 14 % larger at 100x100 (docs/BENCHMARKS.md, "Progressive
    JPEGs"). Encoding needs no more memory: the optimised Huffman tables of
    a baseline JPEG already hold the whole image's coefficients. Changing
    it gives new cache keys and tag URLs (while it is off they are the ones
    they were before this setting existed)."""

    JPEG_DECODER: defaults.JpegDecoder = defaults.JPEG_DECODER
    """Who decodes the pixels of JPEG sources: ``"libjpeg-turbo"`` (through
    Pillow, faster than the mozjpeg inside pyvips-binary) or ``"libvips"``.
    Both give the same pixels. libvips still reads the header, and decodes
    whatever Pillow declines: CMYK, a truncated file, and requests that keep
    all metadata (``strip_metadata`` off).
    Set ``"libvips"`` only to rule the decoder out when chasing a problem.
    Measured in docs/BENCHMARKS.md."""

    ENCODER: defaults.Encoder = defaults.ENCODER
    """Who encodes JPEG and WebP results whose source pixels are all in
    memory (JPEG sources decoded by libjpeg-turbo, and ``sm`` gravity):
    ``"pillow"`` (on the render thread, so several renders in one process
    keep every core busy) or ``"libvips"`` (its savers, which hand strips
    between threads). Both give the same pixels. Results over 2 MP, and
    results that keep EXIF, XMP or IPTC, are always encoded by libvips. Set
    ``"libvips"`` only to rule the encoder out when chasing a problem.
    Measured in docs/BENCHMARKS.md."""

    QUALITY_MODE: defaults.QualityMode = defaults.QUALITY_MODE
    """``"standard"`` or ``"high"``. High resizes in linear light with
    Lanczos3 from a decode of at least twice the thumbnail's size: a median
    of 2.6-3.9 SSIMULACRA2 points above bare libvips at equal bytes on real
    photos, up to 24 on fine contrasty detail (foliage, ripples), for about
    1.4-2x the CPU of a render (docs/quality.md). A URL's ``quality_mode``
    option (``qm:high``, ``qm:standard``; the tags' ``quality_mode``) wins
    over this. Changing it gives new cache keys and tag URLs."""

    AUTOQUALITY: AutoQualitySettings = AUTOQUALITY_OFF
    """A quality per image: a dict of imgproxy's ``IMGPROXY_AUTOQUALITY_*`` less the
    prefix (``METHOD`` ``size``/``dssim``, ``TARGET``, ``MIN``, ``MAX``, ``FORMAT_MIN``,
    ``FORMAT_MAX``, ``ALLOWED_ERROR``, ``MAX_RESOLUTION``), which a URL's ``autoquality``
    redefines. Off by default: a miss encodes up to 7 times (docs/quality.md); new keys."""

    COORDINATION_CACHE: str = ""
    """Alias in ``CACHES`` (Redis or Memcached) through which processes that
    share a result cache agree who renders a hot key, so it is rendered once
    across all of them. Empty: each process coordinates only its own threads.
    Give its client a socket timeout too (system check ``oximg.W010``)."""

    COORDINATION_TIMEOUT: float = defaults.COORDINATION_TIMEOUT
    """Seconds a call to the ``COORDINATION_CACHE`` may take. A cache that
    fails or takes longer (a Redis that is down, or frozen) never fails a
    request: the request renders without a lease, as if there were no
    coordination, no request asks the cache again for a few seconds, and
    ``/health`` reports it until it answers."""

    METRICS: bool = defaults.METRICS
    """Answer ``<prefix>metrics`` with Prometheus metrics (requests by status,
    cache hits, renders and their duration, queue and memory, process RSS).
    Off by default: they tell whoever can read them your traffic and error
    rates. Needs the ``django-oximg[metrics]`` extra (prometheus-client);
    without it, or with this off, that path is a 404. ``<prefix>health``
    always answers. Restrict it with ``METRICS_TOKEN``, at the proxy, or by
    mounting it apart (docs/operations.md)."""

    METRICS_TOKEN: str = ""
    """A bearer token ``<prefix>metrics`` requires: scrapers send
    ``Authorization: Bearer <token>`` (Prometheus: ``authorization:
    credentials``); any other request gets 401. Empty: no token is asked
    for. Generate one like a key (``secrets.token_urlsafe(32)``)."""

    METADATA_CACHE: str = "default"
    """Alias in ``CACHES`` where the template tags keep each source's size,
    orientation and version, read once from the first kilobytes of the
    source (its header, never the whole file). Shared by every process
    (Redis, Memcached, a database or file cache), a page's sources are read
    once for the whole site, and a purge (``oximg_purge``, the model
    signals) reaches every process. A system check warns when it is a
    dummy cache (every render reads every source again) or a per-process
    one (``LocMemCache``) while ``DEBUG`` is off."""

    METADATA_CACHE_TIMEOUT: int = 60 * 60 * 24 * 30
    """Seconds the template tag keeps a source's size and version in the
    ``METADATA_CACHE``. Local files are stat'ed on every render and their
    modification time and size are part of the key, so a replaced file gets
    a new URL at once; other storages (S3, ...) are asked again only after
    this timeout."""

    TAG_DEFAULTS: Mapping[str, Any] = field(default_factory=dict)
    """Keywords the template tags, ``get_thumbnail`` and the Jinja2 functions
    take when a call does not give them, e.g. ``{"upscale": True}``. A site
    moving from sorl-thumbnail keeps its sizes with
    ``{"upscale": True, "sizing": "sorl"}`` (sorl enlarges small images by
    default and rounds sizes its own way); from easy-thumbnails, with
    ``{"sizing": "easy-thumbnails"}``. Any tag keyword but ``preset`` and
    ``options`` (a preset named ``default`` applies to every request);
    values are checked at start-up. They change which URLs the tags write,
    and every URL carries its options, so no cache key changes."""

    RAISE_TEMPLATE_ERRORS: bool = False
    """Raise, rather than log, when a template tag, filter or Jinja2 function
    cannot make a thumbnail (a missing or unreadable source, a bad value
    given through a variable). Off, as sorl-thumbnail and easy-thumbnails
    are with ``THUMBNAIL_DEBUG`` off, and whatever ``DEBUG`` says: the tag
    renders its ``{% empty %}`` branch, or nothing, and logs one WARNING
    line on the ``django_oximg`` logger naming the source and the error, so
    one missing media file never turns a page into a 500. Turn it on in
    test settings to make such a page fail its test. Mistakes in what a tag
    says literally are a ``TemplateSyntaxError`` when the template is
    compiled, whatever this says; ``get_thumbnail()`` in Python always
    raises."""

    WATERMARK: str = ""
    """The image the ``watermark``/``wm`` option lays over results, as a
    source is named in URLs: a name in ``SOURCE_STORAGE`` (``"brand/mark.png"``)
    or ``alias:name`` for a storage in ``SOURCES``. It is read through the
    same checks as every source (the name jail, ``MAX_SRC_FILE_SIZE``,
    ``MAX_SRC_RESOLUTION``), once per process, when the first thumbnail is
    served or the first URL written. Its content is part of the output
    fingerprint, so replacing the file gives new cache keys and tag URLs
    once the processes restart. Empty: ``wm`` URLs are a 400 (imgproxy
    ignores the option instead)."""

    WATERMARK_OPACITY: float = defaults.WATERMARK_OPACITY
    """Multiplies the opacity every ``wm`` URL asks for (0 to 1), as
    imgproxy's ``IMGPROXY_WATERMARK_OPACITY``."""

    EXTENSIONS: tuple[Extension, ...] = ()
    """The site's own processing options and steps: dotted paths to
    ``Extension`` objects (``["myapp.thumbnails.SEPIA"]``), each an option
    URLs and presets may use (``sep:0.8``), a keyword of the tags
    (``sepia=0.8``) and a function ``(image, value) -> image`` run at its
    place among the pipeline's steps. Each is imported and checked at
    start-up (``manage.py check``, ``oximg.E030``). Their names, places and
    ``version`` strings are part of the output fingerprint: bump an
    extension's ``version`` when its step's output changes, and every cache
    key and tag URL changes with it. See docs/extensions.md."""

    CLIENT_HINTS: bool = False
    """Let the browser's client hints set a URL's ``dpr`` and ``width``
    (``Sec-CH-DPR``/``DPR``, ``Sec-CH-Width``/``Width``) where the URL and
    its presets leave them unset, as imgproxy's
    ``IMGPROXY_ENABLE_CLIENT_HINTS``, rounded up to fixed steps (DPR 1,
    1.5, 2, 3, 4, 6, 8; widths on a ladder of four rungs per doubling up
    to ``MAX_RESULT_DIMENSION``), so one URL has at most a few hundred
    answers whatever clients send (docs/urls.md). Answers a hint could
    change say so in ``Vary``. Browsers send hints only to sites that ask for them
    (``Accept-CH``; see docs/django.md). The tags' URLs always set both, so
    the sizes they print stay exact."""

    ALLOWED_PROCESSING_OPTIONS: tuple[str, ...] = ()
    """Option names URLs may use, as they are written there (``"w"`` and
    ``"width"`` are two names; list ``"pr"`` to allow presets), as imgproxy's
    ``IMGPROXY_ALLOWED_PROCESSING_OPTIONS``. Presets may use any option.
    Another option in a URL is a 400. Empty: every option."""

    ONLY_PRESETS: bool = False
    """URLs name presets only, as imgproxy's ``IMGPROXY_ONLY_PRESETS``: the
    segment after the signature is ``name:name...`` (``/<sig>/card:small/plain/a.jpg``).
    The tags then write that form, from their ``preset`` alone; such URLs
    have no room for the tags' version token, so a replaced source keeps its
    URL (give the new file a new name)."""

    RENDER_AHEAD: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    """Sizes rendered in a background task when a model's file field gets a
    new file, by ``"app_label.Model.field"``: a list of sizes, or a dict
    of names to sizes, e.g. ``{"gallery.Photo.image": ["thumb", "400x300
    crop=center"]}``. A size is written as the tag takes it, a geometry or
    a preset's name then ``keyword=value`` words (quoted with ``'`` when a
    value has a space: ``crop='top left'``); a named size is what the tag
    renders for ``{% thumbnail photo.image "name" %}``. An entry here
    replaces the model's own ``oximg_render_ahead`` declaration for that
    field. Each size is checked at start-up (``manage.py check``,
    ``oximg.E020``). Needs Django's Tasks framework (``django.tasks`` on
    Django 6, the ``django-tasks`` package on 5.2). See
    docs/render-ahead.md."""

    RENDER_AHEAD_BACKEND: str = "default"
    """The alias in ``TASKS`` of the backend the render-ahead tasks are
    enqueued on."""

    RENDER_AHEAD_QUEUE: str = "default"
    """The queue of that backend the render-ahead tasks are enqueued on."""

    RENDER_AHEAD_RETRIES: int = 3
    """How many times a render-ahead task that failed is enqueued again
    (the sizes already stored are not rendered again). Once they are used
    up, the failure is logged at ERROR and the sizes left are rendered by
    their first request, as without rendering ahead."""

    RENDER_AHEAD_RETRY_DELAY: float = 30.0
    """Seconds before the first retry of a failed render-ahead task,
    doubled for each further one (on backends that can run a task later;
    others run the retry at once)."""


#: Settings that change the bytes of some answer. Their values make the
#: output fingerprint (:func:`output_fingerprint`), which is part of every
#: result cache key and of every URL the template tags write, so a changed
#: setting never serves, and no CDN or browser keeps, a result made under the
#: old one. ``PRESETS`` change bytes too, but through the options they
#: expand to, which the keys and the tags' URLs already cover. A test lists
#: every setting as one of these or as not changing output bytes, and fails
#: for a new setting that is neither.
OUTPUT_SETTINGS = (
    "QUALITY",
    "MAX_RESULT_DIMENSION",
    "MAX_ANIMATION_FRAMES",
    "JPEG_SHRINK_MARGIN",
    "JPEG_PROGRESSIVE",
    "QUALITY_MODE",
    "AUTO_FORMAT",
    "FORMAT_BEST_BY_DEFAULT",
    "FORMAT_BEST_COMPLEXITY_THRESHOLD",
    "FORMAT_BEST_MAX_RESOLUTION",
    "FORMAT_BEST_ALLOW_SKIPS",
    "WATERMARK",
    "WATERMARK_OPACITY",
    "EXTENSIONS",
    "AUTOQUALITY",
)

#: Output settings that matter only with a ``WATERMARK``: in the fingerprint
#: with the watermark's content, and not at all while it is empty, so a site
#: without one keeps the fingerprint (and every key and URL) it had.
WATERMARK_SETTINGS = ("WATERMARK", "WATERMARK_OPACITY")

#: Output settings that :func:`output_fingerprint` writes its own way.
SPECIAL_OUTPUT_SETTINGS = (
    *WATERMARK_SETTINGS,
    *setting_values.FORMAT_BEST_SETTINGS,
    "EXTENSIONS",
    "JPEG_PROGRESSIVE",
    "AUTOQUALITY",
)

#: Keys whose value may be given as one string or a list of strings.
LIST_KEYS = ("KEY", "SALT", "HTTP_SOURCES", "ALLOWED_PROCESSING_OPTIONS")

#: A URL path of RFC 3986 segment characters, starting and ending with "/":
#: anything else (spaces, "?", "#", quotes) would be changed by browsers or
#: servers, and the WSGI prefix match would then miss.
URL_PREFIX_PATTERN = re.compile(r"/(?:[A-Za-z0-9._~!$&'()*+,;=:@%-]+/)*")

#: Source aliases are written ``alias:name`` in URLs, so they must not hold ":" or "/".
SOURCE_ALIAS_PATTERN = re.compile(r"[A-Za-z0-9_.-]+")

#: Not aliases: ``http://host/x`` is a URL source, not ``//host/x`` in an ``http`` source.
URL_SCHEMES = ("http", "https")


def derived_hex(purpose: str) -> str:
    """A key or salt derived from ``SECRET_KEY``, so signing is never off by default."""
    return salted_hmac(
        f"django_oximg.{purpose}", "v1", secret=django_settings.SECRET_KEY, algorithm="sha256"
    ).hexdigest()


@functools.cache
def setting_type(name: str) -> Any:
    """The type setting ``name`` is declared with, its annotation evaluated alone.

    Only the settings a site gives are checked, so a new process evaluates
    those few annotations rather than every one (``typing.get_type_hints``
    of the whole class was most of the settings' build).
    """
    annotation = OximgSettings.__annotations__[name]
    return eval(annotation, globals()) if isinstance(annotation, str) else annotation


def unknown_keys(raw: Mapping[str, Any]) -> list[str]:
    names = {f.name for f in dataclasses.fields(OximgSettings)}
    return sorted(set(raw) - names)


#: Settings whose value is read into a typed one by a function of ``setting_values``.
VALUE_READERS: dict[str, Callable[[Any], Any]] = {
    "RENDER_AHEAD": setting_values.render_ahead,
    "AUTOQUALITY": setting_values.autoquality,
}


def build_settings(raw: Mapping[str, Any]) -> OximgSettings:
    """Validate ``raw`` (the OXIMG dict) into settings; raise ImproperlyConfigured.

    Unknown keys are skipped here: the system check ``oximg.E002`` reports
    them, so a typo is loud at ``manage.py check`` without breaking imports.
    The extensions are loaded first: the presets and the tags' defaults may
    use their options.
    """
    values: dict[str, Any] = {"EXTENSIONS": setting_values.extensions(raw.get("EXTENSIONS", ()))}
    for name, value in raw.items():
        if name not in OximgSettings.__annotations__ or name == "EXTENSIONS":
            continue
        if name == "SRCSET_WIDTHS":
            values[name] = setting_values.srcset_widths(value, default_of(name))
            continue
        if name == "TAG_DEFAULTS":
            values[name] = setting_values.tag_defaults(value, values["EXTENSIONS"])
            continue
        if name in VALUE_READERS:
            values[name] = VALUE_READERS[name](value)
            continue
        if name == "FALLBACK_IMAGE_PATH":
            value = setting_values.file_path(name, value)
        if name in LIST_KEYS and isinstance(value, str):
            value = (value,)
        elif name in LIST_KEYS and isinstance(value, list | tuple):
            value = tuple(value)
        check_type(name, value, setting_type(name))
        values[name] = value
    if "QUALITY" in values:
        values["QUALITY"] = {**defaults.QUALITY, **values["QUALITY"]}
    for name in ("QUALITY", "SOURCES", "PRESETS"):
        if name in values:
            # Read-only copies: the settings object is shared by the whole process.
            values[name] = types.MappingProxyType(dict(values[name]))
    if not values.get("KEY"):
        values["KEY"] = (derived_hex("key"),)
        values["SALT"] = (derived_hex("salt"),)
    result = OximgSettings(**values)
    _validate(result)
    return result


def _validate(conf: OximgSettings) -> None:
    try:
        pairs_from_hex(conf.KEY, conf.SALT)
    except ValueError as exc:
        raise ImproperlyConfigured(f"OXIMG: KEY and SALT: {exc}.") from exc
    if not 1 <= conf.SIGNATURE_SIZE <= 32:
        raise ImproperlyConfigured("OXIMG: SIGNATURE_SIZE must be between 1 and 32.")
    if not URL_PREFIX_PATTERN.fullmatch(conf.URL_PREFIX):
        raise ImproperlyConfigured(
            "OXIMG: URL_PREFIX must be a URL path that starts and ends with '/', "
            f"e.g. '/img/', not {conf.URL_PREFIX!r}."
        )
    for name in setting_values.COUNTS:
        if getattr(conf, name) < 0:
            raise ImproperlyConfigured(f"OXIMG: {name} must not be negative.")
    for name in (
        "QUEUE_TIMEOUT",
        "RENDER_TIMEOUT",
        "HTTP_TIMEOUT",
        "SOURCE_TIMEOUT",
        "CACHE_STORAGE_TIMEOUT",
        "COORDINATION_TIMEOUT",
    ):
        if getattr(conf, name) <= 0:
            raise ImproperlyConfigured(f"OXIMG: {name} must be positive.")
    if conf.RENDER_AHEAD_RETRY_DELAY < 0:
        raise ImproperlyConfigured("OXIMG: RENDER_AHEAD_RETRY_DELAY must not be negative.")
    if not 1 <= conf.JPEG_SHRINK_MARGIN <= 8:
        raise ImproperlyConfigured("OXIMG: JPEG_SHRINK_MARGIN must be between 1 and 8.")
    if not 0 <= conf.WATERMARK_OPACITY <= 1:
        raise ImproperlyConfigured("OXIMG: WATERMARK_OPACITY must be between 0 and 1.")
    if not 0 <= conf.FORMAT_BEST_COMPLEXITY_THRESHOLD <= 100:
        raise ImproperlyConfigured("OXIMG: FORMAT_BEST_COMPLEXITY_THRESHOLD must be 0 to 100.")
    if conf.FORMAT_BEST_MAX_RESOLUTION < 0:
        raise ImproperlyConfigured("OXIMG: FORMAT_BEST_MAX_RESOLUTION must not be negative.")
    names = OPTION_NAMES.union(*(extension.names for extension in conf.EXTENSIONS))
    unknown = sorted(set(conf.ALLOWED_PROCESSING_OPTIONS) - names)
    if unknown:
        raise ImproperlyConfigured(
            f"OXIMG: ALLOWED_PROCESSING_OPTIONS names unknown options: {', '.join(unknown)}."
        )
    if not conf.METADATA_CACHE:
        raise ImproperlyConfigured("OXIMG: METADATA_CACHE must name a cache in CACHES.")
    setting_values.check_fallback(
        conf.FALLBACK_IMAGE_PATH, conf.FALLBACK_IMAGE_DATA, conf.FALLBACK_IMAGE_HTTP_CODE
    )
    _validate_quality(conf.QUALITY)
    _validate_sources(conf.SOURCES)
    _validate_presets(conf.PRESETS, conf.EXTENSIONS)
    _validate_http_sources(conf.HTTP_SOURCES)


def _validate_quality(quality: Mapping[str, int]) -> None:
    for fmt, value in quality.items():
        if fmt not in OUTPUT_FORMATS:
            raise ImproperlyConfigured(
                f"OXIMG: QUALITY has unknown format {fmt!r}; use {', '.join(OUTPUT_FORMATS)}."
            )
        if not 1 <= value <= 100:
            raise ImproperlyConfigured(f"OXIMG: QUALITY[{fmt!r}] must be between 1 and 100.")


def _validate_sources(sources: Mapping[str, str]) -> None:
    for alias in sources:
        if not SOURCE_ALIAS_PATTERN.fullmatch(alias):
            raise ImproperlyConfigured(
                f"OXIMG: SOURCES alias {alias!r} may only hold letters, digits, '_', '.', '-'."
            )
        if alias.lower() in URL_SCHEMES:
            # ``http:`` + a name starting with "//" would read as a URL.
            raise ImproperlyConfigured(
                f"OXIMG: SOURCES alias {alias!r} is a URL scheme; "
                "sources written 'alias://...' are URLs."
            )


def _validate_http_sources(prefixes: tuple[str, ...]) -> None:
    """Parse every prefix now, as the HTTP store will, so a bad one fails at start-up."""
    if not prefixes:
        return
    from django_oximg.core.stores.http import parse_prefix  # urllib3: only when used

    for prefix in prefixes:
        try:
            parse_prefix(prefix)
        except ValueError as exc:
            raise ImproperlyConfigured(f"OXIMG: HTTP_SOURCES entry {prefix!r}: {exc}.") from exc


def _validate_presets(presets: Mapping[str, str], extensions: tuple[Extension, ...]) -> None:
    """Parse every preset now, so a typo fails at start-up rather than as a 400 per URL.

    As imgproxy does, an empty name (no URL can name it) and a value without
    a single option (a preset that does nothing, most likely a mistake) are
    refused; surrounding spaces do not count.
    """
    for name, value in presets.items():
        if not name.strip():
            raise ImproperlyConfigured(f"OXIMG: PRESETS has an empty preset name ({name!r}).")
        if not any(segment.strip() for segment in value.split("/")):
            raise ImproperlyConfigured(f"OXIMG: PRESETS[{name!r}] is empty.")
        try:
            parse_path(f"/pr:{name}/plain/x", presets, extensions=extensions)
        except InvalidOptions as exc:
            raise ImproperlyConfigured(f"OXIMG: PRESETS[{name!r}]: {exc.detail}.") from exc


def raw_settings() -> Mapping[str, Any]:
    value = getattr(django_settings, "OXIMG", {})
    if not isinstance(value, Mapping):
        raise ImproperlyConfigured("OXIMG must be a dict.")
    return value


@functools.cache
def get_settings() -> OximgSettings:
    """The validated settings of this process (cached; see :func:`reset`)."""
    return build_settings(raw_settings())


def reset() -> None:
    """Forget the cached settings (called on ``setting_changed``)."""
    get_settings.cache_clear()


def output_fingerprint(settings: OximgSettings, watermark_version: str = "") -> str:
    """The fingerprint of ``settings``' :data:`OUTPUT_SETTINGS` (see core/keys.py).

    ``watermark_version`` stands for the content of the ``WATERMARK`` image
    (the settings name it, but cannot say when the file changes); the
    runtime reads it (``runtime.get_output_fingerprint``). An extension
    stands for its code by its ``version``, beside its names and place;
    its order counts (steps at one place run in it). Like the watermark,
    no extensions add nothing, so a site without them keeps its keys;
    so do ``JPEG_PROGRESSIVE`` while it is off, ``AUTOQUALITY`` while it is,
    and the ``FORMAT_BEST_*`` settings at their defaults.
    """
    values: dict[str, object] = {
        name: getattr(settings, name)
        for name in OUTPUT_SETTINGS
        if name not in SPECIAL_OUTPUT_SETTINGS
    }
    if settings.WATERMARK:
        values["WATERMARK"] = [
            *(getattr(settings, name) for name in WATERMARK_SETTINGS),
            watermark_version,
        ]
    if settings.JPEG_PROGRESSIVE:
        values["JPEG_PROGRESSIVE"] = True
    best = [getattr(settings, name) for name in setting_values.FORMAT_BEST_SETTINGS]
    if best != [getattr(OximgSettings, name) for name in setting_values.FORMAT_BEST_SETTINGS]:
        values["FORMAT_BEST"] = best
    if settings.AUTOQUALITY != AUTOQUALITY_OFF:
        values["AUTOQUALITY"] = settings.AUTOQUALITY._asdict()
    if settings.EXTENSIONS:
        values["EXTENSIONS"] = [
            [*extension.names, extension.after, extension.version]
            for extension in settings.EXTENSIONS
        ]
    return output_fingerprint_of(values)


def default_of(name: str) -> Any:
    """The default of field ``name``, calling its factory if it has one."""
    spec = OximgSettings.__dataclass_fields__[name]
    if spec.default_factory is not dataclasses.MISSING:
        return spec.default_factory()
    return spec.default
