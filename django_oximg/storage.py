"""Django storages adapted to the core's store protocols.

A ``FileSystemStorage`` is handed to the core's plain-disk stores, which add
``realpath`` containment and atomic writes (``Storage.save()`` writes in place
and renames on collision, so it is never used for a final cache name on disk).
django-storages' ``S3Storage`` gets its own adapters (:class:`S3SourceStore`,
:class:`S3CacheStore`), which speak to the bucket through boto3 directly: one
GET per source read or cache hit, one PutObject per result, botocore errors
mapped to the core's errors here and nowhere else. Any other storage goes
through the generic adapters. botocore is imported only when an S3 storage is
in use, so the package works without it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import sys
import threading
from collections.abc import Iterator
from typing import Any

from django.core.exceptions import SuspiciousFileOperation
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, Storage

from django_oximg.core.errors import (
    OximgError,
    SourceNotFound,
    SourceTimeout,
    SourceTooLarge,
    SourceUnavailable,
)
from django_oximg.core.keys import QUALITY_SUFFIX, SNIFF_BYTES, content_type
from django_oximg.core.stores.disk import FileSystemCacheStore, FileSystemSourceStore
from django_oximg.core.stores.protocols import (
    TEMP_PREFIX,
    CachedResult,
    CacheEntry,
    CacheStore,
    Reserve,
    SourceStore,
    jail_name,
)

#: Seconds an S3 call may take when the caller names no bound (the settings'
#: ``SOURCE_TIMEOUT`` and ``CACHE_STORAGE_TIMEOUT`` are passed in practice).
DEFAULT_S3_TIMEOUT = 10.0


def source_store(storage: Storage, *, timeout: float = DEFAULT_S3_TIMEOUT) -> SourceStore:
    """The source store for ``storage``.

    ``timeout`` bounds each S3 call (``SOURCE_TIMEOUT``; :class:`S3Client`).
    """
    if isinstance(storage, FileSystemStorage):
        return FileSystemSourceStore(storage.location)
    if is_s3(storage):
        return S3SourceStore(storage, timeout=timeout)
    return StorageSourceStore(storage)


def cache_store(
    storage: Storage,
    *,
    fsync: bool = True,
    cache_control: str = "",
    redirect: bool = False,
    timeout: float = DEFAULT_S3_TIMEOUT,
) -> CacheStore:
    """The result cache store for ``storage``.

    ``fsync`` applies to a local disk (``CACHE_FSYNC``); ``cache_control``,
    ``redirect`` and ``timeout`` to S3 (``CACHE_CONTROL``, ``CACHE_REDIRECT``,
    ``CACHE_STORAGE_TIMEOUT``).
    """
    if isinstance(storage, FileSystemStorage):
        return FileSystemCacheStore(storage.location, fsync=fsync)
    if is_s3(storage):
        return S3CacheStore(
            storage, cache_control=cache_control, redirect=redirect, timeout=timeout
        )
    return StorageCacheStore(storage)


class StorageSourceStore:
    """Sources read through any Django storage."""

    read_on_worker = False

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def check_name(self, name: str) -> None:
        jail_name(name)

    def read(self, name: str, max_bytes: int, reserve: Reserve | None = None) -> bytes:
        name = jail_name(name)
        with storage_errors():
            size = self.storage.size(name)
            if size > max_bytes:
                raise SourceTooLarge(f"{name!r} has {size} bytes, limit {max_bytes}")
            if reserve is not None:
                reserve(size)
            with self.storage.open(name, "rb") as handle:
                # The size, not the limit: see FileSystemSourceStore.read.
                data: bytes = handle.read(size + 1)
                if len(data) > size:
                    data += handle.read(max_bytes + 1 - len(data))
        if len(data) > max_bytes:
            raise SourceTooLarge(f"{name!r} grew past the limit of {max_bytes} bytes")
        return data

    def read_header(self, name: str, limit: int) -> bytes:
        name = jail_name(name)
        with storage_errors(), self.storage.open(name, "rb") as handle:
            return bytes(handle.read(limit))

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


@contextlib.contextmanager
def storage_errors() -> Iterator[None]:
    """OS errors of a storage read as the core's: a missing or refused name is a 404."""
    try:
        yield
    except (FileNotFoundError, SuspiciousFileOperation) as exc:
        raise SourceNotFound(str(exc)) from exc
    except OSError as exc:
        raise SourceUnavailable(str(exc)) from exc


class StorageCacheStore:
    """Results kept in any Django storage.

    Remote object stores (S3) make an upload visible only once complete, so a
    plain save is atomic there. When ``save`` picked another name because the
    key already existed (another process won the race), the copy is removed.

    A lookup or write that fails raises ``OSError``: the thumbnailer treats
    the lookup as a miss and serves the result it could not store, and
    reports either as a fault (``/health``), judged from those calls rather
    than from probes of its own, which on S3 would be paid requests and
    leave objects behind.
    """

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def get(self, key: str) -> CachedResult | None:
        try:
            with self.storage.open(jail_name(key), "rb") as handle:
                data: bytes = handle.read()
        except (FileNotFoundError, SuspiciousFileOperation):
            return None
        return CachedResult(size=len(data), data=data)

    def put(self, key: str, data: bytes) -> None:
        key = jail_name(key)
        saved = self.storage.save(key, ContentFile(data))
        if saved != key:
            self.storage.delete(saved)

    def writable(self) -> bool:
        """Always: whether writes work is told by the writes (see the class docstring)."""
        return True

    def delete(self, key: str) -> None:
        self.storage.delete(jail_name(key))

    def delete_prefix(self, prefix: str) -> int:
        """Remove every result under the directory ``prefix`` (listed first, then deleted).

        Quality sidecars go with them, uncounted: the count is of results.
        """
        keys = list(self._keys_under(jail_name(prefix.rstrip("/"))))
        for key in keys:
            self.storage.delete(key)
        return sum(not key.endswith(QUALITY_SUFFIX) for key in keys)

    def iter_entries(self) -> Iterator[CacheEntry]:
        """Every result, by ``listdir`` recursion, then ``size`` and ``get_modified_time``.

        Generic, so it works on any storage that can list (S3 through
        django-storages can), at the price of two metadata requests per
        object on remote stores.
        """
        for key in self._keys_under(""):
            try:
                size = self.storage.size(key)
                modified = self.storage.get_modified_time(key).timestamp()
            except FileNotFoundError:  # removed since it was listed
                continue
            yield CacheEntry(key, size, modified)

    def _keys_under(self, directory: str) -> Iterator[str]:
        """Keys of the files under ``directory`` ("" for all), depth first."""
        try:
            dirnames, filenames = self.storage.listdir(directory)
        except FileNotFoundError:
            return
        for filename in filenames:
            if not filename.startswith(TEMP_PREFIX):
                yield posixpath.join(directory, filename)
        for dirname in dirnames:
            yield from self._keys_under(posixpath.join(directory, dirname))


# -- S3 through django-storages ----------------------------------------------------------
#
# django-storages' S3Storage keeps one boto3 session and resource per thread
# (``S3Storage.connection`` is a ``threading.local``): each thread that
# touches S3 loads botocore's service model again, about 6.5 MiB, so a
# gunicorn worker with 64 threads grew by hundreds of MiB serving S3 hits
# with nothing rendering. boto3 *clients* are thread-safe (sessions and
# resources are not), so the adapters here share one client per store and
# process (:class:`S3Client`), made with the storage's own credentials and
# options plus timeouts of our own, and leave ``storage.connection`` to the
# rest of the site.

#: Connections the shared client keeps open: one per request thread that may
#: be inside an S3 call at once. More threads than this still work (urllib3
#: opens a connection for each, but keeps only this many for reuse).
S3_CONNECTIONS = 64


class S3Client:
    """One boto3 S3 client shared by a process's threads, each call bounded in time.

    Built on first use from the storage's credentials (``access_key``,
    ``secret_key``, ``security_token`` or ``session_profile``), region,
    endpoint, TLS options and ``client_config``, with this client's own
    timeouts and attempts in place of ``client_config``'s: ``attempts``
    tries, each of which may take ``timeout / attempts`` seconds, a third of
    it to connect (botocore's ``connect_timeout``: milliseconds, when the
    endpoint is up) and two thirds for the answer (``read_timeout``, the
    longest wait for any part of it). botocore's defaults (60 s each, up to
    five attempts in its legacy retry mode) would let one call hang a
    request for minutes.

    A process forked after the client was made (gunicorn ``--preload``) makes
    its own: a client's open connections must not be shared between
    processes.
    """

    def __init__(self, storage: Any, *, timeout: float, attempts: int) -> None:
        self.storage = storage
        self.timeout = timeout
        self.attempts = attempts
        self._lock = threading.Lock()
        self._client: Any = None
        self._pid = 0

    def __call__(self) -> Any:
        client, pid = self._client, os.getpid()
        if client is None or self._pid != pid:
            with self._lock:
                if self._client is None or self._pid != pid:
                    self._client, self._pid = self._make(), pid
                client = self._client
        return client

    def config(self) -> Any:
        """The storage's ``client_config`` with this client's timeouts, attempts and pool."""
        from botocore.config import Config

        per_try = self.timeout / self.attempts
        bounds = Config(
            connect_timeout=per_try / 3,
            read_timeout=per_try * 2 / 3,
            retries={"total_max_attempts": self.attempts, "mode": "standard"},
            max_pool_connections=S3_CONNECTIONS,
        )
        base = self.storage.client_config
        return base.merge(bounds) if base is not None else bounds

    def _make(self) -> Any:
        import boto3

        storage = self.storage
        if storage.session_profile:
            session = boto3.Session(profile_name=storage.session_profile)
        else:
            session = boto3.Session(
                aws_access_key_id=storage.access_key,
                aws_secret_access_key=storage.secret_key,
                aws_session_token=storage.security_token,
            )
        return session.client(
            "s3",
            region_name=storage.region_name,
            use_ssl=storage.use_ssl,
            endpoint_url=storage.endpoint_url,
            config=self.config(),
            verify=storage.verify,
        )


#: S3 error codes meaning "no such object": GET answers NoSuchKey; HEAD has no
#: body, so its code is the bare status. NoSuchBucket is a configuration
#: error, not a missing source: it stays a 502 and is logged.
NOT_FOUND_CODES = frozenset({"NoSuchKey", "404", "NotFound"})

#: S3 error codes for a range that starts past the end: the object is empty.
UNSATISFIABLE_RANGE_CODES = frozenset({"InvalidRange", "416"})


def is_s3(storage: Storage) -> bool:
    """Whether ``storage`` is django-storages' S3Storage (or a subclass).

    Looked up in ``sys.modules``: an S3Storage instance exists only if its
    module was imported, so nothing is imported here and the check is free
    for everyone else.
    """
    module = sys.modules.get("storages.backends.s3")
    return module is not None and isinstance(storage, module.S3Storage)


def botocore_errors() -> Any:
    """``botocore.exceptions``, imported on first use by an S3 store."""
    import botocore.exceptions

    return botocore.exceptions


def s3_key(storage: Any, name: str) -> str:
    """The object key of a jailed ``name``, under the storage's ``location``.

    The storage's own normalisation, so keys match what ``storage.url()``
    and ``storage.open()`` use.
    """
    return str(storage._normalize_name(jail_name(name)))


def download_params(storage: Any, key: str) -> dict[str, Any]:
    """The storage's object parameters that apply to reads (SSE-C keys, RequestPayer)."""
    from s3transfer.constants import ALLOWED_DOWNLOAD_ARGS

    params = storage.get_object_parameters(key)
    return {name: value for name, value in params.items() if name in ALLOWED_DOWNLOAD_ARGS}


def error_code(error: Any) -> str:
    """The S3 error code of a botocore ClientError ("NoSuchKey", "404", ...)."""
    return str(error.response.get("Error", {}).get("Code", ""))


def source_error(error: Exception, name: str) -> OximgError:
    """The core error for a botocore exception raised while reading ``name``."""
    exceptions = botocore_errors()
    if isinstance(error, exceptions.ClientError):
        code = error_code(error)
        if code in NOT_FOUND_CODES:
            return SourceNotFound(f"{name!r}: S3 {code}")
        return SourceUnavailable(f"{name!r}: S3 {code}: {error}")
    if isinstance(error, exceptions.ConnectTimeoutError | exceptions.ReadTimeoutError):
        return SourceTimeout(f"{name!r}: {error}")
    return SourceUnavailable(f"{name!r}: {error}")


class S3SourceStore:
    """Sources in an S3 bucket, read with one GetObject each.

    The size limit is checked on the response's Content-Length before any of
    the body is read (the body is then dropped unread), so an oversized
    source costs one request and no transfer, and the read itself is bounded.
    Each call may take ``timeout`` seconds, in two attempts (a source read
    is worth a retry; the thumbnailer also stops waiting for it at
    ``SOURCE_TIMEOUT``).
    """

    read_on_worker = False

    def __init__(self, storage: Storage, *, timeout: float = DEFAULT_S3_TIMEOUT) -> None:
        self.storage: Any = storage
        self.client = S3Client(storage, timeout=timeout, attempts=2)

    def check_name(self, name: str) -> None:
        jail_name(name)

    def read(self, name: str, max_bytes: int, reserve: Reserve | None = None) -> bytes:
        key = s3_key(self.storage, name)
        exceptions = botocore_errors()
        try:
            response = self.client().get_object(
                Bucket=self.storage.bucket_name, Key=key, **download_params(self.storage, key)
            )
            with contextlib.closing(response["Body"]) as body:
                size = int(response.get("ContentLength", -1))
                if size > max_bytes:
                    raise SourceTooLarge(f"{name!r} has {size} bytes, limit {max_bytes}")
                if reserve is not None:
                    reserve(size if size >= 0 else max_bytes)
                data: bytes = body.read(max_bytes + 1)
        except (exceptions.ClientError, exceptions.BotoCoreError) as error:
            raise source_error(error, name) from error
        if len(data) > max_bytes:
            raise SourceTooLarge(f"{name!r} grew past the limit of {max_bytes} bytes")
        if 0 <= size != len(data):
            raise SourceUnavailable(f"{name!r}: read {len(data)} of {size} bytes")
        return data

    def read_header(self, name: str, limit: int) -> bytes:
        """The object's first ``limit`` bytes: one ranged GetObject.

        At most ``limit`` bytes are read even from a server that ignores the
        range and sends the whole object; the rest is dropped unread.
        """
        key = s3_key(self.storage, name)
        exceptions = botocore_errors()
        try:
            response = self.client().get_object(
                Bucket=self.storage.bucket_name,
                Key=key,
                Range=f"bytes=0-{limit - 1}",
                **download_params(self.storage, key),
            )
            with contextlib.closing(response["Body"]) as body:
                return bytes(body.read(limit))
        except exceptions.ClientError as error:
            if error_code(error) in UNSATISFIABLE_RANGE_CODES:
                return b""  # an empty object has no first byte to range over
            raise source_error(error, name) from error
        except exceptions.BotoCoreError as error:
            raise source_error(error, name) from error

    def version(self, name: str) -> str:
        """A hash of the object's ETag (one HEAD request).

        The ETag changes with the content, even when a replacement has the
        same size and lands within the same second (S3's LastModified has
        one-second resolution, so modification time and size could repeat).
        """
        key = s3_key(self.storage, name)
        exceptions = botocore_errors()
        try:
            head = self.client().head_object(
                Bucket=self.storage.bucket_name, Key=key, **download_params(self.storage, key)
            )
        except (exceptions.ClientError, exceptions.BotoCoreError) as error:
            raise source_error(error, name) from error
        etag = str(head.get("ETag", "")).strip('"')
        if not etag:  # S3-compatible servers without ETags
            etag = f"{head.get('LastModified')}:{head.get('ContentLength')}"
        return hashlib.sha256(etag.encode()).hexdigest()[:16]


class S3CacheStore(StorageCacheStore):
    """Results in an S3 bucket: one PutObject per result, one GET or HEAD per lookup.

    * ``put`` is a single PutObject with the result's Content-Type and
      ``cache_control``: S3 makes an object visible whole or not at all, so
      it is atomic, and an existing key is overwritten in place (never
      ``Storage.save``'s renaming). Failures become ``OSError``, which the
      thumbnailer reports and survives (served from memory, nothing cached).
    * ``get`` is one GetObject whose body is handed over unread as
      ``CachedResult.stream`` (the reply streams it to the client), or with
      ``redirect``, one HeadObject and the object's ``storage.url()``. No
      such key is a miss; any other failure an ``OSError`` (a miss too, and
      reported).
    * Each call is one attempt of at most ``timeout`` seconds
      (``CACHE_STORAGE_TIMEOUT``): a lookup that fails is rendered anyway
      and a write that fails is served anyway, so a retry would only make
      the request wait longer.
    * Listing and purging come from :class:`StorageCacheStore`.
    """

    def __init__(
        self,
        storage: Storage,
        *,
        cache_control: str = "",
        redirect: bool = False,
        timeout: float = DEFAULT_S3_TIMEOUT,
    ) -> None:
        super().__init__(storage)
        self.s3: Any = storage
        self.client = S3Client(storage, timeout=timeout, attempts=1)
        self.cache_control = cache_control
        self.redirect = redirect

    def get(self, key: str) -> CachedResult | None:
        """One GetObject (or HeadObject with ``redirect``)."""
        key = jail_name(key)
        exceptions = botocore_errors()
        try:
            return self._head(key) if self.redirect else self._get(key)
        except exceptions.ClientError as error:
            if error_code(error) in NOT_FOUND_CODES:
                return None
            raise OSError(f"S3 lookup of {key}: {error}") from error
        except exceptions.BotoCoreError as error:
            raise OSError(f"S3 lookup of {key}: {error}") from error

    def put(self, key: str, data: bytes) -> None:
        key = jail_name(key)
        object_key = s3_key(self.s3, key)
        exceptions = botocore_errors()
        try:
            self.client().put_object(
                Bucket=self.s3.bucket_name,
                Key=object_key,
                Body=data,
                **self._write_params(object_key, data[:SNIFF_BYTES]),
            )
        except (exceptions.ClientError, exceptions.BotoCoreError) as error:
            raise OSError(f"S3 PutObject {object_key}: {error}") from error

    def _get(self, key: str) -> CachedResult:
        object_key = s3_key(self.s3, key)
        response = self.client().get_object(
            Bucket=self.s3.bucket_name, Key=object_key, **download_params(self.s3, object_key)
        )
        return CachedResult(size=int(response["ContentLength"]), stream=response["Body"])

    def _head(self, key: str) -> CachedResult:
        object_key = s3_key(self.s3, key)
        head = self.client().head_object(
            Bucket=self.s3.bucket_name, Key=object_key, **download_params(self.s3, object_key)
        )
        return CachedResult(size=int(head["ContentLength"]), url=str(self.s3.url(key)))

    def _write_params(self, object_key: str, head: bytes = b"") -> dict[str, Any]:
        """The storage's object parameters (ACL, encryption, ...) with our type and caching.

        ``head``, the object's first bytes, gives the type of a ``format:best``
        answer, which its key does not say.
        """
        params: dict[str, Any] = self.s3.get_object_parameters(object_key)
        params["ContentType"] = content_type(object_key, head)
        if self.cache_control:
            params.setdefault("CacheControl", self.cache_control)
        if "ACL" not in params and getattr(self.s3, "default_acl", None):
            params["ACL"] = self.s3.default_acl
        return params
