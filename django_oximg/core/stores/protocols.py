"""Where sources come from and where results go: protocols plus a plain-disk store.

The thumbnailer only sees these protocols, so a Django storage (``storage.py``),
a plain directory (this module) or anything else can stand behind it.

Two rules hold for every store:

* A name is jailed before it touches the store (:func:`jail_name`): no ``..``
  segment, no absolute path, no NUL, no backslash. On disk, the resolved real
  path must also stay inside the root, so a symlink cannot lead out of it.
* A result is written atomically: to a temporary file in the destination
  directory, flushed and fsynced, then ``os.replace``-d onto its final name. A
  crash at any point leaves either nothing or the whole file under the final
  name, never a partial one. Orphaned temporary files carry :data:`TEMP_PREFIX`
  so that they can be found and removed. (Without the fsync, which
  ``CACHE_FSYNC`` can turn off, that still holds for a crashed process, not
  for a power cut.)

Cache stores can also be listed and pruned (:meth:`CacheStore.iter_entries`,
:meth:`CacheStore.delete_prefix`), which the operator commands and the purge
hooks use: every variant of one source sits under one directory, so purging a
source is one prefix delete.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import BinaryIO, NamedTuple, Protocol

from django_oximg.core.errors import SourceNotFound

#: Temporary files of unfinished cache writes start with this, so a cleaner can
#: tell them from results.
TEMP_PREFIX = "tmp-oximg-"

#: Called by a source read with a number of bytes before it holds that many
#: more (the request's memory budget: :meth:`Admission.reserve
#: <django_oximg.core.limits.executor.Admission.reserve>`); it may wait, or raise.
Reserve = Callable[[int], None]

#: Longest path component, in bytes, that file systems take (NAME_MAX on
#: Linux, and on most others); a longer one could never name a file.
MAX_COMPONENT_BYTES = 255

#: Longest source name, in bytes.
MAX_NAME_BYTES = 1024


class CachedResult(NamedTuple):
    """A result found in the cache: on local disk (``path``), as bytes, as an
    open stream from a remote store (``stream``), or as a URL to redirect to.

    A ``stream`` has one reader: whoever answers with it must close it.
    """

    size: int
    path: str | None = None
    data: bytes | None = None
    #: The object's body, read as the response is sent (remote stores, e.g. S3).
    stream: BinaryIO | None = None
    #: Where the client may fetch the object itself (``CACHE_REDIRECT``).
    url: str | None = None
    #: The quality ``autoquality`` chose for it, from its sidecar
    #: (:func:`~django_oximg.core.keys.quality_key`); 0 when none was
    #: searched, or none was read. Stores leave it 0: the lookup fills it in.
    quality: int = 0

    def head(self, limit: int) -> bytes:
        """At most ``limit`` of its first bytes: in memory, from its file, or from its
        stream (closed after, as its one reader); nothing for a URL alone."""
        if self.data is not None:
            return self.data[:limit]
        if self.stream is not None:
            with contextlib.closing(self.stream) as stream:
                return bytes(stream.read(limit))
        if self.path is not None:
            with open(self.path, "rb") as handle:
                return handle.read(limit)
        return b""

    def in_memory(self) -> CachedResult:
        """This result with its stream read into ``data`` (and closed).

        For a result several replies share (single-flight followers): a
        stream can be sent once only, bytes any number of times.
        """
        if self.stream is None:
            return self
        with contextlib.closing(self.stream) as stream:
            data = stream.read()
        return CachedResult(size=len(data), data=data, url=self.url, quality=self.quality)


class CacheEntry(NamedTuple):
    """One stored result as a listing sees it (for cleaning by age and size)."""

    key: str
    size: int
    #: Last modification as a POSIX timestamp (a hit does not change it).
    modified: float


class SourceStore(Protocol):
    """Reads source images by jailed name."""

    #: True when reads are as cheap as a local disk's: the thumbnailer then
    #: reads on the render worker, once the render may start (queued requests
    #: hold nothing). False (S3, HTTP): read on the request thread, so network
    #: waits never hold a render slot.
    read_on_worker: bool

    def check_name(self, name: str) -> None:
        """Raise SourceNotFound if this store could never serve ``name``.

        No I/O: it runs before every cache lookup, so that a source the
        configuration no longer allows is not served from the cache either.
        """
        ...

    def read(self, name: str, max_bytes: int, reserve: Reserve | None = None) -> bytes:
        """Return the source's bytes.

        Raise SourceNotFound when it does not exist or is not allowed,
        SourceTooLarge when it is bigger than ``max_bytes`` (checked before
        reading where the store knows the size), SourceUnavailable on failure.
        ``reserve``, when given, is called with each number of bytes before
        they are read (the whole size at once where the store knows it), so
        that they count against the memory budget while they download.
        """
        ...

    def read_header(self, name: str, limit: int) -> bytes:
        """Return the source's first ``limit`` bytes (all of it when shorter).

        For the template tags, which need a source's size and orientation,
        not its pixels (:mod:`django_oximg.core.headers`): a ranged read on
        remote stores, never more than ``limit`` bytes transferred. Raises
        as :meth:`read` does (no size limit applies).
        """
        ...

    def version(self, name: str) -> str:
        """A short token that changes whenever the source's content changes."""
        ...


class CacheStore(Protocol):
    """Holds encoded results under keys made by the thumbnailer."""

    def get(self, key: str) -> CachedResult | None:
        """Return the cached result, or None on a miss."""
        ...

    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` atomically (all or nothing)."""
        ...

    def writable(self) -> bool:
        """Whether a ``put`` can be expected to succeed now (the health check asks).

        Must be cheap and free of side effects: load balancers call it every
        few seconds. A store that cannot tell without writing should answer
        from what it has seen (e.g. a recent failed ``put``).
        """
        ...

    def delete(self, key: str) -> None:
        """Remove the result under ``key``; a missing key is not an error."""
        ...

    def delete_prefix(self, prefix: str) -> int:
        """Remove every result under the directory ``prefix``; return how many.

        ``prefix`` names a directory of keys (``"ab/ab12..."``), not a string
        prefix: ``"ab/ab1"`` does not touch ``"ab/ab12/x.webp"``.
        """
        ...

    def iter_entries(self) -> Iterator[CacheEntry]:
        """Every stored result, in no particular order (temporary files excluded)."""
        ...


def jail_name(name: str) -> str:
    """Return ``name`` as a safe relative storage name, or raise SourceNotFound.

    The name has already been percent-decoded exactly once by the options
    parser; it is not decoded again here, so ``%2e%2e`` stays a literal name.
    A name no file system could hold (a component over
    :data:`MAX_COMPONENT_BYTES`, the whole over :data:`MAX_NAME_BYTES`) is
    refused here too: it names nothing, so it is a 404 like any other
    missing source, not a storage failure.
    """
    if not name or "\x00" in name or "\\" in name or name.startswith("/"):
        raise SourceNotFound(f"rejected source name {name[:300]!r}")
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise SourceNotFound(f"rejected source name {name[:300]!r}")
    encoded = name.encode("utf-8", "surrogatepass")
    if len(encoded) > MAX_NAME_BYTES or any(
        len(part.encode("utf-8", "surrogatepass")) > MAX_COMPONENT_BYTES for part in parts
    ):
        raise SourceNotFound(f"source name too long: {name[:100]!r}...")
    return name
