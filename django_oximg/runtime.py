"""The composition root: one thumbnailer, pool and stores per process.

Built lazily on first use from :mod:`django_oximg.conf`, never at import, and
rebuilt when settings change (``apps.py`` connects :func:`reset` to
``setting_changed``), so tests and live reconfiguration see fresh objects.

The template tags import this module for the signer and the source stores
only, so the thumbnailer's modules (the pipeline, and with it libvips and
Pillow) are imported when the thumbnailer is first built, not here.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings as django_settings
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.core.files.storage import FileSystemStorage, InvalidStorageError, Storage, storages

from django_oximg import conf, storage
from django_oximg.core.errors import OximgError
from django_oximg.core.keys import CONTENT_TYPES
from django_oximg.core.limits.cgroups import default_memory_budget, usable_cpus
from django_oximg.core.limits.executor import Executor
from django_oximg.core.limits.timeouts import RequestTimeouts
from django_oximg.core.options import URLRules
from django_oximg.core.options.signing import URLSigner, pairs_from_hex
from django_oximg.core.serving.coordination import CacheCoordinator, Coordinator
from django_oximg.core.serving.faults import Faults
from django_oximg.core.stores.disk import FileSystemSourceStore
from django_oximg.core.stores.protocols import CacheStore, SourceStore
from django_oximg.core.stores.reads import SourceReads
from django_oximg.core.stores.resolver import URL_ALIAS, SourceResolver

if TYPE_CHECKING:
    from django_oximg.core.pipeline import WatermarkImage
    from django_oximg.core.serving.handler import Thumbnailer, ThumbnailerConfig
    from django_oximg.core.serving.replies import FallbackImage
    from django_oximg.core.serving.staging import Limits
    from django_oximg.core.stores.http import HttpSourceConfig

_lock = threading.Lock()
_libvips_ready = False


def prepare_libvips(settings: conf.OximgSettings) -> None:
    """Check the libvips version and set it up once per process (caller holds _lock).

    glibc's malloc is told to keep freed render memory here too: this is
    where a process starts rendering (:mod:`django_oximg.core.limits.malloc`).
    """
    global _libvips_ready
    if not _libvips_ready:
        from django_oximg.core import pipeline
        from django_oximg.core.limits import malloc

        pipeline.check_libvips_version()
        pipeline.configure(concurrency=settings.LIBVIPS_CONCURRENCY, block_untrusted=True)
        malloc.keep_freed_memory(settings.MALLOC_THRESHOLD)
        _libvips_ready = True


def signer(settings: conf.OximgSettings) -> URLSigner:
    return URLSigner(pairs_from_hex(settings.KEY, settings.SALT), settings.SIGNATURE_SIZE)


def default_cache_storage() -> FileSystemStorage:
    media_url = str(django_settings.MEDIA_URL or "/media/")
    return FileSystemStorage(
        location=os.path.join(str(django_settings.MEDIA_ROOT), "oximg"),
        base_url=media_url.rstrip("/") + "/oximg/",
    )


def cache_store(settings: conf.OximgSettings) -> CacheStore:
    """The result cache of ``settings``, without the render pool (purges need only this)."""
    return storage.cache_store(
        cache_storage(settings),
        fsync=settings.CACHE_FSYNC,
        cache_control=settings.CACHE_CONTROL,
        redirect=settings.CACHE_REDIRECT,
        timeout=settings.CACHE_STORAGE_TIMEOUT,
    )


def cache_storage(settings: conf.OximgSettings) -> Storage:
    if settings.CACHE_STORAGE:
        return storages[settings.CACHE_STORAGE]
    return default_cache_storage()


def source_storages(settings: conf.OximgSettings) -> dict[str, Storage]:
    """Source storages by alias; the default source under ``""``."""
    found = {"": storages[settings.SOURCE_STORAGE]}
    found.update({alias: storages[name] for alias, name in settings.SOURCES.items()})
    return found


@functools.cache
def get_source_resolver() -> SourceResolver:
    """This process's source resolver: the thumbnailer and the template tags share it.

    Built without the thumbnailer (no render pool, no libvips), so a page
    render that only writes URLs never builds either.
    """
    return SourceResolver(source_stores(conf.get_settings()))


def source_stores(settings: conf.OximgSettings) -> dict[str, SourceStore]:
    """Source stores by alias, plus the HTTP store when ``HTTP_SOURCES`` lists prefixes."""
    stores = {
        alias: storage.source_store(s, timeout=settings.SOURCE_TIMEOUT)
        for alias, s in source_storages(settings).items()
    }
    if settings.HTTP_SOURCES:
        # urllib3 (tens of milliseconds to import) only for sites with URL sources.
        from django_oximg.core.stores.http import HttpSourceStore

        stores[URL_ALIAS] = HttpSourceStore(http_source_config(settings))
    return stores


def http_source_config(settings: conf.OximgSettings) -> HttpSourceConfig:
    from django_oximg.core.stores.http import HttpSourceConfig

    return HttpSourceConfig(
        prefixes=settings.HTTP_SOURCES,
        timeout=settings.HTTP_TIMEOUT,
        max_redirects=settings.HTTP_MAX_REDIRECTS,
        allow_private_networks=settings.HTTP_ALLOW_PRIVATE_NETWORKS,
    )


def read_watermark(settings: conf.OximgSettings) -> WatermarkImage | None:
    """The ``WATERMARK`` image, read as a source is: jailed name, size and resolution limits.

    A watermark that cannot be read stops the server from starting to
    serve (ImproperlyConfigured) rather than failing request by request.
    """
    if not settings.WATERMARK:
        return None
    from django_oximg.core import pipeline

    try:
        resolved = SourceResolver(source_stores(settings)).resolve(settings.WATERMARK)
        data = resolved.store.read(resolved.name, settings.MAX_SRC_FILE_SIZE)
        info = pipeline.probe(data)
    except OximgError as error:
        raise ImproperlyConfigured(
            f"OXIMG: WATERMARK {settings.WATERMARK!r} cannot be read: {error.detail or error}."
        ) from error
    if info.width * info.height > settings.MAX_SRC_RESOLUTION:
        raise ImproperlyConfigured(
            f"OXIMG: WATERMARK {settings.WATERMARK!r} is over MAX_SRC_RESOLUTION."
        )
    return pipeline.WatermarkImage(data, info.width, info.height)


def read_fallback(settings: conf.OximgSettings) -> FallbackImage | None:
    """The ``FALLBACK_IMAGE_*`` image, or None: read once, and refused at start-up
    (ImproperlyConfigured) unless libvips reads it and browsers show it as it is."""
    path, text = settings.FALLBACK_IMAGE_PATH, settings.FALLBACK_IMAGE_DATA
    if not path and not text:
        return None
    from django_oximg.core import pipeline
    from django_oximg.core.serving.replies import FallbackImage

    name = "FALLBACK_IMAGE_PATH" if path else "FALLBACK_IMAGE_DATA"
    try:
        data = Path(path).read_bytes() if path else base64.b64decode(text, validate=True)
        fmt = pipeline.web_format(pipeline.probe(data))
    except (OSError, binascii.Error, OximgError) as error:
        detail = getattr(error, "detail", "") or error
        raise ImproperlyConfigured(f"OXIMG: {name} cannot be read: {detail}.") from error
    if not fmt:
        raise ImproperlyConfigured(f"OXIMG: {name} must be a JPEG, PNG, WebP, GIF or AVIF image.")
    return FallbackImage(
        data, CONTENT_TYPES[fmt], settings.FALLBACK_IMAGE_HTTP_CODE, settings.FALLBACK_IMAGE_TTL
    )


def watermark_version(watermark: WatermarkImage | None) -> str:
    """A short digest of the watermark's content, for the output fingerprint."""
    return hashlib.sha256(watermark.data).hexdigest()[:16] if watermark else ""


@functools.cache
def get_watermark() -> WatermarkImage | None:
    """This process's watermark image, read once (see :func:`reset`)."""
    return read_watermark(conf.get_settings())


@functools.cache
def get_output_fingerprint() -> str:
    """The output fingerprint of this process's settings and watermark (cached)."""
    return conf.output_fingerprint(conf.get_settings(), watermark_version(get_watermark()))


def thumbnailer_config(
    settings: conf.OximgSettings, watermark: WatermarkImage | None = None
) -> ThumbnailerConfig:
    """What the thumbnailer itself reads of ``settings`` (its steps get theirs directly).

    ``watermark`` is read from ``settings`` when not given: its digest is
    part of the output fingerprint.
    """
    from django_oximg.core.serving.handler import ThumbnailerConfig

    if watermark is None:
        watermark = read_watermark(settings)
    return ThumbnailerConfig(
        presets=dict(settings.PRESETS),
        allow_unsigned=settings.ALLOW_UNSIGNED,
        auto_format=settings.AUTO_FORMAT,
        best_by_default=settings.FORMAT_BEST_BY_DEFAULT,
        peer_wait=request_timeouts(settings).peer_wait(),
        cache_control=settings.CACHE_CONTROL,
        metrics=settings.METRICS,
        metrics_token=settings.METRICS_TOKEN,
        fingerprint=conf.output_fingerprint(settings, watermark_version(watermark)),
        rules=url_rules(settings),
        client_hints=settings.CLIENT_HINTS,
        hit_cache_bytes=settings.HIT_CACHE_BYTES,
        fallback=read_fallback(settings),
    )


def limits(settings: conf.OximgSettings, watermark: WatermarkImage | None = None) -> Limits:
    """What sources are checked against and renders run with, from ``settings``.

    ``watermark`` is read from ``settings`` when not given.
    """
    from django_oximg.core import pipeline
    from django_oximg.core.serving.staging import Limits

    if watermark is None:
        watermark = read_watermark(settings)
    return Limits(
        render=pipeline.RenderSettings(
            quality=dict(settings.QUALITY),
            max_result_dimension=settings.MAX_RESULT_DIMENSION,
            max_animation_frames=settings.MAX_ANIMATION_FRAMES,
            jpeg_shrink_margin=settings.JPEG_SHRINK_MARGIN,
            jpeg_progressive=settings.JPEG_PROGRESSIVE,
            jpeg_decoder=settings.JPEG_DECODER,
            encoder=settings.ENCODER,
            watermark=watermark,
            watermark_opacity=settings.WATERMARK_OPACITY,
            quality_mode=settings.QUALITY_MODE,
            extensions=settings.EXTENSIONS,
            best_complexity_threshold=settings.FORMAT_BEST_COMPLEXITY_THRESHOLD,
            best_max_resolution=settings.FORMAT_BEST_MAX_RESOLUTION,
            autoquality=settings.AUTOQUALITY,
        ),
        max_src_resolution=settings.MAX_SRC_RESOLUTION,
        max_src_file_size=settings.MAX_SRC_FILE_SIZE,
        render_timeout=settings.RENDER_TIMEOUT,
        best_allows_skips=settings.FORMAT_BEST_ALLOW_SKIPS,
    )


def source_reads(settings: conf.OximgSettings) -> SourceReads:
    """The bound on remote source reads at once (``SOURCE_READS``, else two per worker)."""
    return SourceReads(settings.SOURCE_READS or workers(settings) * 2, settings.SOURCE_TIMEOUT)


def request_timeouts(settings: conf.OximgSettings) -> RequestTimeouts:
    """The bounds of each part of a request under ``settings``: their sum is the
    longest a request may take (docs/deployment.md, timeouts).

    The result cache's bound counts only where a call can hang (anything but
    a local disk), the coordination cache's only when there is one.
    """
    try:
        local_cache = isinstance(cache_storage(settings), FileSystemStorage)
    except InvalidStorageError:  # reported by oximg.E003; assume the worst here
        local_cache = False
    return RequestTimeouts(
        queue=settings.QUEUE_TIMEOUT,
        source=settings.SOURCE_TIMEOUT,
        render=settings.RENDER_TIMEOUT,
        cache=0.0 if local_cache else settings.CACHE_STORAGE_TIMEOUT,
        coordination=settings.COORDINATION_TIMEOUT if settings.COORDINATION_CACHE else 0.0,
    )


def url_rules(settings: conf.OximgSettings) -> URLRules:
    """What URLs may say: ``ALLOWED_PROCESSING_OPTIONS`` and ``ONLY_PRESETS``."""
    return URLRules(frozenset(settings.ALLOWED_PROCESSING_OPTIONS), settings.ONLY_PRESETS)


def workers(settings: conf.OximgSettings) -> int:
    """Render threads of this process: ``WORKERS``, or the CPUs it may use."""
    return settings.WORKERS or usable_cpus()


def executor(settings: conf.OximgSettings) -> Executor:
    count = workers(settings)
    return Executor(
        workers=count,
        queue_size=settings.QUEUE_SIZE or count * 16,
        queue_timeout=settings.QUEUE_TIMEOUT,
        memory_budget=settings.MEMORY_BUDGET or default_memory_budget(),
    )


_thumbnailer: Thumbnailer | None = None


def get_thumbnailer() -> Thumbnailer:
    """This process's thumbnailer, built on first use (once, even under concurrency)."""
    global _thumbnailer
    found = _thumbnailer
    if found is not None:
        return found
    with _lock:
        if _thumbnailer is None:
            _thumbnailer = build_thumbnailer()
        return _thumbnailer


def build_thumbnailer() -> Thumbnailer:
    from django_oximg.core.serving.handler import Thumbnailer

    settings = conf.get_settings()
    prepare_libvips(settings)
    faults = Faults()
    watermark = get_watermark()
    return Thumbnailer(
        thumbnailer_config(settings, watermark),
        signer(settings),
        get_source_resolver(),
        cache_store(settings),
        executor(settings),
        coordinator=coordinator(settings, faults),
        faults=faults,
        limits=limits(settings, watermark),
        reads=source_reads(settings),
    )


def forget_results(directory: str) -> None:
    """Drop what this process's thumbnailer remembers of results under ``directory``.

    A purge calls it so its memory goes at once (other processes notice the
    removed files on their next hit, :mod:`django_oximg.core.serving.hits`). The
    thumbnailer is not built for it.
    """
    found = _thumbnailer
    if found is not None:
        found.hits.forget_under(directory)


def reset() -> None:
    """Drop the thumbnailer (its pool is shut down) so the next use rebuilds it."""
    global _thumbnailer
    with _lock:
        old, _thumbnailer = _thumbnailer, None
    if old is not None:
        old.executor.shutdown(wait=False)
    get_signer.cache_clear()
    get_source_resolver.cache_clear()
    get_watermark.cache_clear()
    get_output_fingerprint.cache_clear()
    conf.reset()


def coordinator(settings: conf.OximgSettings, faults: Faults) -> Coordinator | None:
    """Cross-process leases on the configured Django cache, if any, reporting to ``faults``."""
    if not settings.COORDINATION_CACHE:
        return None
    return CacheCoordinator(
        caches[settings.COORDINATION_CACHE], timeout=settings.COORDINATION_TIMEOUT, faults=faults
    )


@functools.cache
def get_signer() -> URLSigner:
    """This process's URL signer."""
    return signer(conf.get_settings())


def source_is_local(alias: str) -> bool:
    """Whether the source store ``alias`` is on local disk (cheap to stat)."""
    return isinstance(get_source_resolver().stores.get(alias), FileSystemSourceStore)
