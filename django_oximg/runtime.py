"""The composition root: one thumbnailer, pool and stores per process.

Built lazily on first use from :mod:`django_oximg.conf`, never at import, and
rebuilt when settings change (``apps.py`` connects :func:`reset` to
``setting_changed``), so tests and live reconfiguration see fresh objects.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import TYPE_CHECKING

from django.conf import settings as django_settings
from django.core.files.storage import FileSystemStorage, Storage, storages

from django_oximg import conf, storage
from django_oximg.core import pipeline
from django_oximg.core.cgroups import default_memory_budget, usable_cpus
from django_oximg.core.coordination import Coordinator
from django_oximg.core.executor import Executor
from django_oximg.core.signing import URLSigner, pairs_from_hex
from django_oximg.core.sources import URL_ALIAS, SourceResolver
from django_oximg.core.stores import CacheStore, SourceStore
from django_oximg.core.thumbnailer import Thumbnailer, ThumbnailerConfig

if TYPE_CHECKING:
    from django_oximg.core.http_source import HttpSourceConfig

_lock = threading.Lock()
_libvips_ready = False


def prepare_libvips(settings: conf.OximgSettings) -> None:
    """Check the libvips version and set it up once per process (caller holds _lock)."""
    global _libvips_ready
    if not _libvips_ready:
        pipeline.check_libvips_version()
        pipeline.configure(concurrency=settings.LIBVIPS_CONCURRENCY, block_untrusted=True)
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
    stores = {alias: storage.source_store(s) for alias, s in source_storages(settings).items()}
    if settings.HTTP_SOURCES:
        from django_oximg.core.http_source import HttpSourceStore  # only where it is used

        stores[URL_ALIAS] = HttpSourceStore(http_source_config(settings))
    return stores


def http_source_config(settings: conf.OximgSettings) -> HttpSourceConfig:
    from django_oximg.core.http_source import HttpSourceConfig

    return HttpSourceConfig(
        prefixes=settings.HTTP_SOURCES,
        timeout=settings.HTTP_TIMEOUT,
        max_redirects=settings.HTTP_MAX_REDIRECTS,
        allow_private_networks=settings.HTTP_ALLOW_PRIVATE_NETWORKS,
    )


def thumbnailer_config(settings: conf.OximgSettings) -> ThumbnailerConfig:
    return ThumbnailerConfig(
        render=pipeline.RenderSettings(
            quality=dict(settings.QUALITY),
            max_result_dimension=settings.MAX_RESULT_DIMENSION,
            max_animation_frames=settings.MAX_ANIMATION_FRAMES,
            jpeg_shrink_margin=settings.JPEG_SHRINK_MARGIN,
            jpeg_decoder=settings.JPEG_DECODER,
            encoder=settings.ENCODER,
        ),
        presets=dict(settings.PRESETS),
        allow_unsigned=settings.ALLOW_UNSIGNED,
        auto_format=settings.AUTO_FORMAT,
        max_src_resolution=settings.MAX_SRC_RESOLUTION,
        max_src_file_size=settings.MAX_SRC_FILE_SIZE,
        render_timeout=settings.RENDER_TIMEOUT,
        peer_wait=settings.QUEUE_TIMEOUT + settings.RENDER_TIMEOUT,
        cache_control=settings.CACHE_CONTROL,
        metrics=settings.METRICS,
        fingerprint=conf.output_fingerprint(settings),
        hit_cache_bytes=settings.HIT_CACHE_BYTES,
    )


def executor(settings: conf.OximgSettings) -> Executor:
    workers = settings.WORKERS or usable_cpus()
    return Executor(
        workers=workers,
        queue_size=settings.QUEUE_SIZE or workers * 16,
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
    settings = conf.get_settings()
    prepare_libvips(settings)
    return Thumbnailer(
        thumbnailer_config(settings),
        signer(settings),
        get_source_resolver(),
        cache_store(settings),
        executor(settings),
        coordinator=coordinator(settings),
    )


def forget_results(directory: str) -> None:
    """Drop what this process's thumbnailer remembers of results under ``directory``.

    A purge calls it so its memory goes at once (other processes notice the
    removed files on their next hit, :mod:`django_oximg.core.hits`). The
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
    conf.reset()


def coordinator(settings: conf.OximgSettings) -> Coordinator | None:
    """Cross-process leases on the configured Django cache, if any."""
    if not settings.COORDINATION_CACHE:
        return None
    # Here, not at the top: only sites that coordinate need Django's caches.
    from django.core.cache import caches

    from django_oximg.coordination import CacheCoordinator

    return CacheCoordinator(caches[settings.COORDINATION_CACHE])


@functools.cache
def get_signer() -> URLSigner:
    """This process's URL signer."""
    return signer(conf.get_settings())


def source_is_local(alias: str) -> bool:
    """Whether the source storage ``alias`` is on local disk (cheap to stat)."""
    if alias == URL_ALIAS:
        return False
    return isinstance(source_storages(conf.get_settings())[alias], FileSystemStorage)
