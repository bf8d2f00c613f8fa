"""Which source a tag means, and what its header says: size, orientation, version.

A tag names its source by a FieldFile or a storage name; :func:`source_name`
turns either into the source string of a URL (the storage's ``SOURCES``
alias first). :func:`source_metadata` answers the tag's one question about
the file, its size and content version, from the first kilobytes of the
file (:mod:`django_oximg.core.headers`), kept in the ``METADATA_CACHE``
and, for local files, in this process. The purge hooks drop an entry with
:func:`forget_source_metadata`.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.cache import BaseCache, caches
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage

from django_oximg import conf, runtime
from django_oximg.arguments import ThumbnailError
from django_oximg.core import headers
from django_oximg.core.limits.bounded import Breaker
from django_oximg.core.options.geometry import QUARTER_TURN_ORIENTATIONS
from django_oximg.core.stores.disk import FileSystemSourceStore
from django_oximg.core.stores.protocols import SourceStore
from django_oximg.core.stores.resolver import source_for
from django_oximg.memo import SettingsMemo

logger = logging.getLogger("django_oximg")


@dataclass(frozen=True)
class SourceMetadata:
    """What the tag needs of a source: its header size, whether it has alpha, a content version."""

    width: int
    height: int
    orientation: int
    version: str
    #: Whether libvips gives it an alpha band (no placeholder is drawn behind it).
    #: Last, with a default: entries cached before it existed read as opaque.
    alpha: bool = False

    @property
    def upright_size(self) -> tuple[int, int]:
        """Width and height as shown, after the EXIF orientation."""
        if self.orientation in QUARTER_TURN_ORIENTATIONS:
            return self.height, self.width
        return self.width, self.height


def source_name(source: Any) -> str:
    """The source string for a FieldFile (with its source alias) or a name.

    A FieldFile's name is written so that it never reads as another source
    or a URL (:func:`~django_oximg.core.stores.resolver.source_for`); a string is
    the caller's own spelling of a source, used as it is.
    """
    if isinstance(source, File):
        name = str(source.name or "")
        storage = getattr(source, "storage", None)
        if not name:
            raise ThumbnailError("the file field is empty")
        alias = storage_alias(storage) if storage is not None else ""
        return source_for(alias, name)
    name = str(source or "")
    if not name:
        raise ThumbnailError("no source given")
    return name


def storage_alias(storage: Storage) -> str:
    """The OXIMG source alias serving ``storage`` ("" for the default source).

    Looked up once per storage object (a model field keeps one).
    """
    return _storage_aliases.get(storage, lambda: _storage_alias(storage))


_storage_aliases: SettingsMemo[Storage, str] = SettingsMemo(256)


def _storage_alias(storage: Storage) -> str:
    for alias, candidate in runtime.source_storages(conf.get_settings()).items():
        if candidate is storage or _same_location(candidate, storage):
            return alias
    raise ThumbnailError(
        f"the file's storage {type(storage).__name__} is not an OXIMG source; "
        "add its STORAGES alias to OXIMG['SOURCES']"
    )


def _same_location(a: Storage, b: Storage) -> bool:
    return (
        isinstance(a, FileSystemStorage)
        and isinstance(b, FileSystemStorage)
        and a.location == b.location
    )


def source_metadata(source: str) -> SourceMetadata:
    """Header size and version of ``source``, from the ``METADATA_CACHE`` when possible.

    Local files are cheap to stat, so their version is read every time and
    compared with the one kept: a replaced file is noticed at once, and
    their metadata is also kept in this process (:data:`_local_metadata`),
    sparing the cache read. Remote storages are not asked at all on a cache
    hit; their entry expires after ``METADATA_CACHE_TIMEOUT`` (or when the
    purge hooks delete it). A miss reads the source's first kilobytes, not
    the whole file.
    """
    resolved = runtime.get_source_resolver().resolve(source)
    store, name = resolved.store, resolved.name
    local = isinstance(store, FileSystemSourceStore)
    version = ""
    if local:
        version = store.version(name)
        held = _local_metadata.peek(source)
        if held is not None and held.version == version:
            return held
    key = metadata_key(source)
    cached = cache_call(lambda cache: cache.get(key))
    if isinstance(cached, SourceMetadata) and (not local or cached.version == version):
        meta = cached
    else:
        if not local:
            version = store.version(name)
        header = source_header(store, name)
        meta = SourceMetadata(
            header.width, header.height, header.orientation, version, header.alpha
        )
        timeout = conf.get_settings().METADATA_CACHE_TIMEOUT
        cache_call(lambda cache: cache.set(key, meta, timeout))
    if local:
        _local_metadata.put(source, meta)
    return meta


#: Metadata of local sources, by source: checked against the file's version
#: on every use, so it can never be stale (remote sources have no such check
#: and live in the shared ``METADATA_CACHE`` only).
_local_metadata: SettingsMemo[str, SourceMetadata] = SettingsMemo(8192)


def source_header(store: SourceStore, name: str) -> headers.Header:
    """What ``name``'s header says: from its first kilobytes, else from libvips.

    libvips (and with it the whole pipeline) is imported only here, for a
    source the pure-Python reader cannot answer exactly; that reads the
    whole file, as the server will.
    """
    try:
        return headers.read_header(lambda limit: store.read_header(name, limit))
    except headers.UnknownHeader:
        from django_oximg.core import pipeline

        info = pipeline.probe(store.read(name, conf.get_settings().MAX_SRC_FILE_SIZE))
        return headers.Header(
            info.format, info.width, info.height, info.orientation, info.has_alpha
        )


def metadata_cache() -> BaseCache:
    """The Django cache holding source metadata (``METADATA_CACHE``)."""
    return caches[conf.get_settings().METADATA_CACHE]


#: After the metadata cache failed, the tags leave it alone for this many
#: seconds and read sources' headers from their storages instead: a Redis
#: that is down, or frozen (each call then waits out the client's socket
#: timeout, system check oximg.W010), must not fail or stall every tag of
#: every page. The server itself never reads this cache.
CACHE_BREAKER_PAUSE = 10.0

#: Seconds between two log lines about a failing metadata cache.
CACHE_ERROR_LOG_INTERVAL = 60.0

#: The breaker, and the settings it was made under: new settings (a changed
#: ``CACHES`` among them) start with the cache trusted again.
_breaker: tuple[conf.OximgSettings | None, Breaker] = (None, Breaker(CACHE_BREAKER_PAUSE))
_last_cache_error = [float("-inf")]


def cache_breaker() -> Breaker:
    """This settings' breaker for the metadata cache."""
    global _breaker
    settings = conf.get_settings()
    if _breaker[0] is not settings:
        _breaker = (settings, Breaker(CACHE_BREAKER_PAUSE))
    return _breaker[1]


def cache_call(call: Callable[[BaseCache], Any]) -> Any:
    """``call(metadata_cache())``; None, logged, while the cache fails.

    Cache backends raise their own exception types (redis, pymemcache, ...),
    hence the broad catch: any failure means "read the header instead".
    """
    breaker = cache_breaker()
    if not breaker.closed():
        return None
    try:
        return call(metadata_cache())
    except Exception as error:  # see the docstring; a missing alias is a check error
        breaker.opened()
        now = time.monotonic()
        if now - _last_cache_error[0] >= CACHE_ERROR_LOG_INTERVAL:
            _last_cache_error[0] = now
            logger.warning("metadata cache failed, reading source headers instead: %s", error)
        return None


def metadata_key(source: str) -> str:
    """Cache key of ``source``'s metadata: one entry per source, from its name alone.

    One entry (rather than one per version) so that a purge can find and
    delete it without knowing the version; a local file's entry is replaced
    when its version no longer matches.
    """
    return "oximg:meta:" + hashlib.sha256(source.encode()).hexdigest()[:32]


def forget_source_metadata(source: str) -> bool:
    """Drop ``source``'s cached metadata (a purge); whether there was an entry."""
    _local_metadata.discard(source)
    return bool(metadata_cache().delete(metadata_key(source)))
