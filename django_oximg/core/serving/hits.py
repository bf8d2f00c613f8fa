"""Cache hits answered from memory: a raw request path to its prebuilt answer.

Step 2 of a request (the map: :mod:`django_oximg.core.serving`).

Through the full path (:meth:`Thumbnailer.answer
<django_oximg.core.serving.handler.Thumbnailer.answer>`) a hit costs the
signature check, option parsing, the key's two hashes, a ``stat`` in the
result cache and whitenoise's :class:`~whitenoise.responders.StaticFile`
built afresh (another ``stat``, its headers), then an ``open`` and a
``sendfile``. whitenoise serving the same file pays a dict lookup. So the
thumbnailer remembers, per raw request path, the cached file it answered
with: its whitenoise ``StaticFile`` (headers built once) and, for a small
file, its bytes. A URL whose format is negotiated is remembered once per
format class of its ``Accept`` header (which of AVIF and WebP it lists).

What keeps a remembered answer the same, byte for byte, as the full path's:

* An entry is made only from an answer the full path gave for that exact
  raw path, so the signature, the options, the source's name and the HTTP
  allowlist were checked then. All of these depend only on the raw path
  and on the settings, and a settings change builds a new thumbnailer
  (``runtime.reset``), whose map starts empty. A remembered path is
  therefore not checked again: the check would give the same answer.
* URLs that expire (``exp:``) are never remembered: their Cache-Control
  counts down and they turn into a 404.
* Every use ``stat``-s the file: when it is gone (a purge or a clean, in
  this process or another) or is another file (a new inode, size or
  modification time: rendered again), the entry is dropped and the request
  takes the full path. whitenoise's ``Last-Modified`` comes from the
  modification time, so this also keeps that header exact.
* Answers come from the same :class:`CachedFile` either way: conditional
  requests, ranges and HEAD go through its ``StaticFile`` exactly as on the
  full path; only a plain GET of a file held in memory is answered with the
  ``200`` headers that ``StaticFile`` gave when the entry was made.

Memory is bounded by ``HIT_CACHE_BYTES`` (per process): each entry is
charged its bytes (if held) plus :data:`ENTRY_OVERHEAD`, and the least
recently used entries are dropped first. Only local-disk result caches have
entries: a file can be checked with a ``stat``, an S3 object only with a
request, which is what a hit there costs anyway (docs/storages.md).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django_oximg.core.serving import replies
from django_oximg.core.serving.replies import Reply

if TYPE_CHECKING:
    from whitenoise.responders import StaticFile

#: Bytes each entry is charged besides its body: the path, the key, the
#: header tuples and whitenoise's ``StaticFile`` (about 1.5 KiB measured
#: with ``tracemalloc``), rounded up. It bounds the entries at
#: ``HIT_CACHE_BYTES / ENTRY_OVERHEAD`` even when no body is held.
ENTRY_OVERHEAD = 2048

#: A body is held in memory when it is at most this share of
#: ``HIT_CACHE_BYTES`` (1 MiB of the default 32 MiB): one large result
#: cannot push out dozens of thumbnails. Larger files are remembered
#: without their bytes and sent from disk (``wsgi.file_wrapper``).
BODY_SHARE = 32

#: Request headers that make an answer other than the plain 200: these are
#: answered by the entry's ``StaticFile``, as on the full path.
CONDITIONAL_HEADERS = ("HTTP_RANGE", "HTTP_IF_NONE_MATCH", "HTTP_IF_MODIFIED_SINCE")


@dataclass(frozen=True, eq=False)
class CachedFile:
    """A result file on local disk, ready to answer from, as it was when loaded."""

    #: The result's cache key (purging a source drops its entries by key).
    key: str
    path: str
    #: ``(st_ino, st_size, st_mtime_ns)``: the file these answers are for.
    identity: tuple[int, int, int]
    static_file: StaticFile
    #: The headers of a 200 to GET or HEAD, X-Content-Type-Options included.
    ok_headers: tuple[tuple[str, str], ...]
    #: The file's bytes, when small enough to hold (``None``: sent from disk).
    body: bytes | None

    @classmethod
    def load(
        cls, key: str, path: str, headers: list[tuple[str, str]], max_body: int
    ) -> CachedFile | None:
        """The file at ``path`` answered with ``headers``; None when it is gone.

        The bytes and whitenoise's headers (``Last-Modified``,
        ``Content-Length``) come from one open file's ``fstat``, so they
        agree even when the file is replaced meanwhile.
        """
        try:
            with open(path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                body = handle.read(stat.st_size + 1) if stat.st_size <= max_body else None
        except OSError:  # gone (purged, cleaned) or not a file: the caller makes it afresh
            return None
        if body is not None and len(body) != stat.st_size:
            body = None  # changed under us, which atomic writes never do: read from disk
        from whitenoise.responders import StaticFile  # the first hit's, not the first miss's

        static_file = StaticFile(path, headers, stat_cache={path: stat})
        ok = replies.file_reply(static_file, "HEAD", {})
        return cls(
            key=key,
            path=path,
            identity=(stat.st_ino, stat.st_size, stat.st_mtime_ns),
            static_file=static_file,
            ok_headers=tuple(ok.headers),
            body=body,
        )

    @property
    def charge(self) -> int:
        """Bytes of ``HIT_CACHE_BYTES`` this entry takes."""
        return ENTRY_OVERHEAD + (len(self.body) if self.body is not None else 0)

    def is_current(self) -> bool:
        """Whether the file at ``path`` is still the one loaded."""
        try:
            stat = os.stat(self.path)
        except OSError:
            return False
        return (stat.st_ino, stat.st_size, stat.st_mtime_ns) == self.identity

    def reply(self, method: str, request_headers: Mapping[str, str]) -> Reply | None:
        """The answer to GET or HEAD; None when the file has to be opened and is gone."""
        if self.body is not None and method == "GET" and is_plain(request_headers):
            return Reply(200, list(self.ok_headers), self.body)
        try:
            return replies.file_reply(self.static_file, method, request_headers)
        except FileNotFoundError:
            return None


def is_plain(request_headers: Mapping[str, str]) -> bool:
    """Whether a request has none of :data:`CONDITIONAL_HEADERS`."""
    return request_headers.keys().isdisjoint(CONDITIONAL_HEADERS)


@dataclass
class Route:
    """What one raw path was answered with: one file, or one per format class."""

    #: Whether the path's format is negotiated from ``Accept``.
    negotiated: bool
    #: Format class (:func:`HitCache.classify`; "" when not negotiated) -> file.
    files: dict[str, CachedFile] = field(default_factory=dict)

    @property
    def charge(self) -> int:
        return sum(found.charge for found in self.files.values())


class HitCache:
    """Raw request paths and the cached files they were answered with, LRU, bounded.

    Thread-safe: lookups read a dict (atomic under the GIL) and take the
    lock only to mark the entry as recently used; changes take the lock.
    """

    def __init__(self, capacity: int, classify: Callable[[str], str]) -> None:
        """``capacity``: bytes (``HIT_CACHE_BYTES``; 0 turns the map off).
        ``classify``: an ``Accept`` header to its format class (what the
        thumbnailer's negotiation reads of it: two headers of one class get
        the same answer to every path)."""
        self.capacity = capacity
        self.max_body = capacity // BODY_SHARE
        self.classify = classify
        self._routes: OrderedDict[str, Route] = OrderedDict()
        self._used = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        """Bytes charged to the entries held now."""
        return self._used

    def __len__(self) -> int:
        return len(self._routes)

    def lookup(self, path: str, accept: str) -> CachedFile | None:
        """The file last answered for ``path`` (and ``accept``'s format class), if any."""
        route = self._routes.get(path)
        if route is None:
            return None
        found = route.files.get(self.classify(accept) if route.negotiated else "")
        if found is not None:
            with self._lock:
                if path in self._routes:
                    self._routes.move_to_end(path)
        return found

    def remember(self, path: str, negotiated: bool, accept: str, found: CachedFile) -> None:
        """Remember ``found`` as the answer to ``path`` (to ``accept``, if ``negotiated``)."""
        if found.charge > self.capacity:
            return
        variant = self.classify(accept) if negotiated else ""
        with self._lock:
            route = self._routes.get(path)
            if route is None or route.negotiated != negotiated:
                self._drop(path)
                route = self._routes[path] = Route(negotiated)
            else:
                self._routes.move_to_end(path)
            old = route.files.get(variant)
            route.files[variant] = found
            self._used += found.charge - (old.charge if old is not None else 0)
            while self._used > self.capacity and self._routes:
                self._drop(next(iter(self._routes)))

    def forget(self, path: str, found: CachedFile) -> None:
        """Drop ``found`` from ``path``'s entry (its file is gone or was replaced)."""
        with self._lock:
            route = self._routes.get(path)
            if route is None:
                return
            for variant, held in list(route.files.items()):
                if held is found:
                    del route.files[variant]
                    self._used -= found.charge
            if not route.files:
                del self._routes[path]

    def forget_under(self, directory: str) -> int:
        """Drop every entry whose cache key is under ``directory`` (a purged source)."""
        prefix = directory.rstrip("/") + "/"
        with self._lock:
            doomed = [
                path
                for path, route in self._routes.items()
                if any(found.key.startswith(prefix) for found in route.files.values())
            ]
            for path in doomed:
                self._drop(path)
        return len(doomed)

    def clear(self) -> None:
        with self._lock:
            self._routes.clear()
            self._used = 0

    def _drop(self, path: str) -> None:
        """Remove ``path``'s entry (caller holds the lock)."""
        route = self._routes.pop(path, None)
        if route is not None:
            self._used -= route.charge
