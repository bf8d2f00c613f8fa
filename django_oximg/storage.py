"""Django storages adapted to the core's store protocols.

A ``FileSystemStorage`` is handed to the core's plain-disk stores, which add
``realpath`` containment and atomic writes (``Storage.save()`` writes in place
and renames on collision, so it is never used for a final cache name on disk).
Any other storage (S3 through django-storages, ...) goes through the generic
adapters here.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.core.exceptions import SuspiciousFileOperation
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, Storage

from django_oximg.core.errors import SourceNotFound, SourceTooLarge, SourceUnavailable
from django_oximg.core.stores import (
    CachedResult,
    CacheStore,
    FileSystemCacheStore,
    FileSystemSourceStore,
    SourceStore,
    jail_name,
)


def source_store(storage: Storage) -> SourceStore:
    """The source store for ``storage``."""
    if isinstance(storage, FileSystemStorage):
        return FileSystemSourceStore(storage.location)
    return StorageSourceStore(storage)


def cache_store(storage: Storage) -> CacheStore:
    """The result cache store for ``storage``."""
    if isinstance(storage, FileSystemStorage):
        return FileSystemCacheStore(storage.location)
    return StorageCacheStore(storage)


class StorageSourceStore:
    """Sources read through any Django storage."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def read(self, name: str, max_bytes: int) -> bytes:
        name = jail_name(name)
        try:
            size = self.storage.size(name)
            if size > max_bytes:
                raise SourceTooLarge(f"{name!r} has {size} bytes, limit {max_bytes}")
            with self.storage.open(name, "rb") as handle:
                data: bytes = handle.read(max_bytes + 1)
        except (FileNotFoundError, SuspiciousFileOperation) as exc:
            raise SourceNotFound(str(exc)) from exc
        except OSError as exc:
            raise SourceUnavailable(str(exc)) from exc
        if len(data) > max_bytes:
            raise SourceTooLarge(f"{name!r} grew past the limit of {max_bytes} bytes")
        return data

    def version(self, name: str) -> str:
        name = jail_name(name)
        try:
            modified = self.storage.get_modified_time(name)
            size = self.storage.size(name)
        except (FileNotFoundError, SuspiciousFileOperation) as exc:
            raise SourceNotFound(str(exc)) from exc
        except (OSError, NotImplementedError) as exc:
            raise SourceUnavailable(str(exc)) from exc
        return f"{int(modified.timestamp() * 1e6):x}{size:x}"


#: Seconds a failed ``put`` keeps :meth:`StorageCacheStore.writable` False,
#: unless a later ``put`` succeeds first: long enough for a few health probes
#: to see it, short enough that a store that recovered while every request
#: was a hit is not reported broken for long.
PUT_FAILURE_MEMORY = 60.0


class StorageCacheStore:
    """Results kept in any Django storage.

    Remote object stores (S3) make an upload visible only once complete, so a
    plain save is atomic there. When ``save`` picked another name because the
    key already existed (another process won the race), the copy is removed.

    ``writable`` is passive: it reports a recent failed ``put`` rather than
    probing with a write, because a probe per health check (every few seconds,
    from every process) would be a paid request to S3 and would leave objects
    behind.
    """

    def __init__(self, storage: Storage, clock: Callable[[], float] = time.monotonic) -> None:
        self.storage = storage
        self.clock = clock
        self._last_put_failure: float | None = None

    def get(self, key: str) -> CachedResult | None:
        try:
            with self.storage.open(jail_name(key), "rb") as handle:
                data: bytes = handle.read()
        except (FileNotFoundError, SuspiciousFileOperation):
            return None
        return CachedResult(size=len(data), data=data)

    def put(self, key: str, data: bytes) -> None:
        key = jail_name(key)
        try:
            saved = self.storage.save(key, ContentFile(data))
            if saved != key:
                self.storage.delete(saved)
        except Exception:  # not swallowed: remembered for writable(), then re-raised
            self._last_put_failure = self.clock()
            raise
        self._last_put_failure = None

    def writable(self) -> bool:
        """True unless a ``put`` failed within :data:`PUT_FAILURE_MEMORY` seconds."""
        failed = self._last_put_failure
        return failed is None or self.clock() - failed >= PUT_FAILURE_MEMORY
