"""Tests for django_oximg.core.serving.handler: one request, start to finish.

The core alone, as a plain-WSGI user would wire it: disk stores under
``tmp_path``, a real :class:`Executor`, a signer made from hex keys. No Django.
Counting wrappers around the stores prove what was (not) read or written.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import pyvips

from django_oximg.core import pipeline
from django_oximg.core.limits.executor import Executor
from django_oximg.core.pipeline import budget
from django_oximg.core.serving.handler import Thumbnailer, ThumbnailerConfig
from django_oximg.core.serving.replies import Reply
from django_oximg.core.stores.disk import FileSystemCacheStore, FileSystemSourceStore
from django_oximg.core.stores.http import URL_ALIAS, HttpSourceConfig, HttpSourceStore
from django_oximg.core.stores.protocols import TEMP_PREFIX, CachedResult, Reserve
from tests import images
from tests.constants import JOIN_TIMEOUT, MIB, SIGNER

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

#: A request the thumbnailer must serve: 640x480 JPEG fitted into 200x200.
CONTROL = "/rs:fit:200:200/plain/photos/landscape.jpg@jpeg"


class CountingSourceStore:
    """A source store that counts reads, to prove a rejected request read nothing."""

    def __init__(self, root: Path) -> None:
        self.inner = FileSystemSourceStore(root)
        self.reads = 0
        self._lock = threading.Lock()
        #: False: read like a remote store, on the request thread (see making.Maker.make).
        self.read_on_worker = False

    def check_name(self, name: str) -> None:
        self.inner.check_name(name)

    def read(self, name: str, max_bytes: int, reserve: Reserve | None = None) -> bytes:
        with self._lock:
            self.reads += 1
        return self.inner.read(name, max_bytes, reserve)

    def version(self, name: str) -> str:
        return self.inner.version(name)


class CountingCacheStore:
    """A disk cache store that counts writes and can hook into ``get``."""

    def __init__(self, root: Path) -> None:
        self.inner = FileSystemCacheStore(root)
        self.puts = 0
        #: Every key looked up, in order.
        self.gets: list[str] = []
        self.after_get: Callable[[CachedResult | None], None] = lambda found: None

    def get(self, key: str) -> CachedResult | None:
        self.gets.append(key)
        found = self.inner.get(key)
        self.after_get(found)
        return found

    def put(self, key: str, data: bytes) -> None:
        self.puts += 1
        self.inner.put(key, data)


# The stores of conftest's ``make`` (and so ``thumbnailer``), counting.


@pytest.fixture
def sources(source_dir: Path) -> CountingSourceStore:
    return CountingSourceStore(source_dir)


@pytest.fixture
def cache(cache_dir: Path) -> CountingCacheStore:
    return CountingCacheStore(cache_dir)


def get_raw(thumbnailer: Thumbnailer, path: str, method: str = "GET", **headers: str) -> Reply:
    """Ask for ``path`` (unsigned; signed here); the caller must close ``reply.file``."""
    return thumbnailer.reply(SIGNER.signed_path(path), method, headers)


def get(thumbnailer: Thumbnailer, path: str, method: str = "GET", **headers: str) -> Reply:
    """Ask for ``path`` and return the reply with any file read into ``body`` and closed."""
    reply = get_raw(thumbnailer, path, method, **headers)
    return Reply(reply.status, reply.headers, body_of(reply))


def body_of(reply: Reply) -> bytes:
    """The reply's content, reading and closing its file if it has one."""
    if reply.file is None:
        return reply.body
    with reply.file as handle:
        return handle.read()


def header(reply: Reply, name: str) -> str | None:
    found = [value for key, value in reply.headers if key.lower() == name.lower()]
    assert len(found) <= 1, f"{name} sent {len(found)} times"
    return found[0] if found else None


def cached_files(cache_dir: Path) -> list[Path]:
    return sorted(p for p in cache_dir.rglob("*") if p.is_file()) if cache_dir.exists() else []


def decode(data: bytes) -> pyvips.Image:
    return pyvips.Image.new_from_buffer(data, "")


# -- the control request -------------------------------------------------------------


def test_valid_request_renders_caches_once_and_then_serves_the_cached_bytes(
    thumbnailer: Thumbnailer, cache_dir: Path
) -> None:
    first = get(thumbnailer, CONTROL)
    assert first.status == 200
    assert first.file is None  # a miss is answered from memory
    image = decode(first.body)
    assert (image.width, image.height) == (200, 150)
    assert image.get("vips-loader").startswith("jpegload")
    assert header(first, "Content-Type") == "image/jpeg"
    assert header(first, "Content-Length") == str(len(first.body))
    assert header(first, "Cache-Control") == "public, max-age=31536000, immutable"
    [stored] = cached_files(cache_dir)
    assert stored.read_bytes() == first.body

    second = get_raw(thumbnailer, CONTROL)
    assert second.status == 200
    assert second.file is None  # a small hit is held in memory (core/serving/hits.py)
    assert second.body == first.body
    assert header(second, "Last-Modified") is not None  # the file's: a hit
    assert thumbnailer.renders == 1
    assert cached_files(cache_dir) == [stored]


def test_with_the_hit_cache_off_a_hit_is_a_file_the_server_may_sendfile(
    make: Callable[..., Thumbnailer], cache_dir: Path
) -> None:
    thumbnailer = make(hit_cache_bytes=0)
    first = get(thumbnailer, CONTROL)
    second = get_raw(thumbnailer, CONTROL)
    assert second.status == 200
    assert second.file is not None
    assert body_of(second) == first.body
    assert len(thumbnailer.hits) == 0


def test_etag_is_strong_and_the_same_for_miss_and_hit(thumbnailer: Thumbnailer) -> None:
    miss = get(thumbnailer, CONTROL)
    hit = get(thumbnailer, CONTROL)
    body_of(hit)
    etag = header(miss, "ETag")
    assert etag is not None and etag.startswith('"') and etag.endswith('"')
    assert not etag.startswith("W/")
    assert header(hit, "ETag") == etag


def test_configured_cache_control_is_sent_on_miss_and_hit(make: Callable[..., Thumbnailer]) -> None:
    thumbnailer = make(cache_control="public, max-age=60")
    miss = get(thumbnailer, CONTROL)
    hit = get(thumbnailer, CONTROL)
    body_of(hit)
    assert header(miss, "Cache-Control") == "public, max-age=60"
    assert header(hit, "Cache-Control") == "public, max-age=60"


def test_if_none_match_gives_304_on_a_miss_and_on_a_hit(
    thumbnailer: Thumbnailer, cache_dir: Path
) -> None:
    etag = thumbnailer.job_for(SIGNER.signed_path(CONTROL), "").etag
    on_miss = get(thumbnailer, CONTROL, HTTP_IF_NONE_MATCH=etag)
    assert on_miss.status == 304
    assert on_miss.body == b"" and on_miss.file is None
    assert header(on_miss, "ETag") == etag
    assert cached_files(cache_dir)  # the result was still made and kept

    on_hit = get_raw(thumbnailer, CONTROL, HTTP_IF_NONE_MATCH=etag)
    assert on_hit.status == 304
    assert on_hit.file is None and on_hit.body == b""
    other = get(thumbnailer, CONTROL, HTTP_IF_NONE_MATCH='"something-else"')
    assert other.status == 200
    body_of(other)


def test_head_sends_headers_without_a_body_on_miss_and_hit(thumbnailer: Thumbnailer) -> None:
    full = get(thumbnailer, CONTROL)  # a miss: the result is now cached
    head_hit = get_raw(thumbnailer, CONTROL, method="HEAD")
    assert head_hit.status == 200
    assert head_hit.file is None and head_hit.body == b""
    assert header(head_hit, "Content-Length") == str(len(full.body))
    assert header(head_hit, "Content-Type") == "image/jpeg"


def test_head_on_a_miss_sends_the_length_without_the_body(make: Callable[..., Thumbnailer]) -> None:
    thumbnailer = make()
    head = get_raw(thumbnailer, "/rs:fit:120:120/plain/photos/landscape.jpg@jpeg", method="HEAD")
    assert head.status == 200
    assert head.body == b"" and head.file is None
    length = header(head, "Content-Length")
    assert length is not None and int(length) > 0


def test_range_on_a_hit_gives_206_with_that_slice(thumbnailer: Thumbnailer) -> None:
    full = get(thumbnailer, CONTROL).body
    partial = get(thumbnailer, CONTROL, HTTP_RANGE="bytes=0-99")
    assert partial.status == 206
    assert header(partial, "Content-Range") == f"bytes 0-99/{len(full)}"
    assert body_of(partial) == full[:100]


def test_negotiated_formats_are_separate_cache_objects_with_vary(
    thumbnailer: Thumbnailer, cache_dir: Path
) -> None:
    """Bad input 49 (docs/security.md): Accept: image/webp then */* never share an object."""
    path = "/rs:fit:200:200/plain/photos/landscape.jpg"
    webp = get(thumbnailer, path, HTTP_ACCEPT="image/webp,*/*")
    anything = get(thumbnailer, path, HTTP_ACCEPT="*/*")
    assert webp.body[:4] == b"RIFF" and webp.body[8:12] == b"WEBP"
    assert anything.body[:3] == b"\xff\xd8\xff"
    assert header(webp, "Vary") == "Accept"
    assert header(anything, "Vary") == "Accept"
    assert header(webp, "ETag") != header(anything, "ETag")
    assert len(cached_files(cache_dir)) == 2
    again = get(thumbnailer, path, HTTP_ACCEPT="*/*")
    assert body_of(again) == anything.body
    assert header(again, "Vary") == "Accept"


@pytest.mark.parametrize(
    ("accept", "loader"),
    [
        ("image/avif,image/webp,*/*", "webpload_buffer"),
        ("image/avif,*/*", "gifload_buffer"),
        ("*/*", "gifload_buffer"),
    ],
)
def test_a_negotiated_animation_is_never_avif(
    thumbnailer: Thumbnailer, accept: str, loader: str
) -> None:
    """AVIF keeps one frame: a GIF's negotiated URL gets WebP or GIF, every frame."""
    reply = get(thumbnailer, "/rs:fit:100:100/plain/photos/anim.gif", HTTP_ACCEPT=accept)
    assert reply.status == 200
    assert header(reply, "Vary") == "Accept"
    image = pyvips.Image.new_from_buffer(reply.body, "", n=-1)
    assert image.get("vips-loader") == loader
    assert image.get("n-pages") == pyvips.Image.new_from_buffer(images.animated_gif(), "").get(
        "n-pages"
    )


def test_an_explicit_format_sends_no_vary(thumbnailer: Thumbnailer) -> None:
    reply = get(thumbnailer, CONTROL, HTTP_ACCEPT="image/avif,image/webp")
    assert reply.body[:3] == b"\xff\xd8\xff"
    assert header(reply, "Vary") is None


def test_without_auto_format_the_source_format_is_used_and_no_vary(
    make: Callable[..., Thumbnailer],
) -> None:
    thumbnailer = make(auto_format=False)
    reply = get(thumbnailer, "/rs:fit:100:100/plain/photos/alpha.png", HTTP_ACCEPT="image/webp")
    assert reply.body[:8] == b"\x89PNG\r\n\x1a\n"
    assert header(reply, "Vary") is None


# -- rejections: nothing read, nothing cached ----------------------------------------


def assert_rejected(reply: Reply, status: int, cache_dir: Path, cached: int = 0) -> None:
    """An error answer, never stored; ``cached`` results of earlier requests stay."""
    assert reply.status == status, reply.body
    assert header(reply, "Cache-Control") == "no-store"
    assert header(reply, "Content-Type") == "text/plain; charset=utf-8"
    assert reply.file is None
    assert 0 < len(reply.body) < 100
    assert header(reply, "Content-Length") == str(len(reply.body))
    assert len(cached_files(cache_dir)) == cached


def flip_one_bit(signature: str) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    first = alphabet.index(signature[0])
    return alphabet[first ^ 1] + signature[1:]


def forbidden_variants() -> list[tuple[str, str]]:
    signature = SIGNER.sign(CONTROL)
    missing_source = "/rs:fit:200:200/plain/photos/does-not-exist.jpg@jpeg"
    return [
        ("missing signature", CONTROL),
        ("flipped bit", f"/{flip_one_bit(signature)}{CONTROL}"),
        ("truncated", f"/{signature[:-1]}{CONTROL}"),
        ("padded", f"/{signature}={CONTROL}"),
        ("placeholder", f"/insecure{CONTROL}"),
        ("other path", f"/{signature}/rs:fit:201:200/plain/photos/landscape.jpg@jpeg"),
        ("signature pasted again", f"/{signature}/{signature}{CONTROL}"),
        ("empty", "/"),
        ("nonexistent source", f"/{flip_one_bit(SIGNER.sign(missing_source))}{missing_source}"),
    ]


@pytest.mark.parametrize(("why", "path"), forbidden_variants())
def test_bad_signatures_get_403_before_any_source_read(
    thumbnailer: Thumbnailer,
    sources: CountingSourceStore,
    cache: CountingCacheStore,
    cache_dir: Path,
    why: str,
    path: str,
) -> None:
    reply = thumbnailer.reply(path, "GET", {})
    assert_rejected(reply, 403, cache_dir)
    assert reply.body == b"Forbidden\n"
    assert sources.reads == 0, why
    assert cache.puts == 0


def test_unsigned_placeholder_works_only_when_allowed(
    make: Callable[..., Thumbnailer], cache_dir: Path
) -> None:
    allowed = make(allow_unsigned=True)
    for placeholder, status in (("insecure", 200), ("unsafe", 200), ("whatever", 403)):
        reply = allowed.reply(f"/{placeholder}{CONTROL}", "GET", {})
        body_of(reply)
        assert reply.status == status, placeholder


@pytest.mark.parametrize(
    ("path", "named"),
    [
        ("/rs:fit:200:200/bogus:1/plain/photos/landscape.jpg@jpeg", b"bogus"),
        ("/w:abc/plain/photos/landscape.jpg@jpeg", b"width"),
        ("/rs:sideways:10:10/plain/photos/landscape.jpg@jpeg", b"resizing_type"),
        ("/q:1000/plain/photos/landscape.jpg@jpeg", b"quality"),
        ("/w:100/plain/photos/landscape.jpg@tiff", b"format"),
        ("/w:100/ph:1/plain/photos/landscape.jpg@jpeg", b"preserve_hdr is not supported"),
    ],
)
def test_bad_options_get_400_naming_the_option(
    thumbnailer: Thumbnailer,
    sources: CountingSourceStore,
    cache_dir: Path,
    path: str,
    named: bytes,
) -> None:
    reply = get(thumbnailer, path)
    assert_rejected(reply, 400, cache_dir)
    assert named in reply.body.lower()
    assert sources.reads == 0


@pytest.mark.parametrize(
    "source",
    [
        "photos/missing.jpg",
        "../../etc/passwd",
        "%2e%2e/%2e%2e/etc/passwd",
        "%252e%252e/%252e%252e/etc/passwd",
        "../sources-secret/secret.jpg",
        "photos/escape.jpg",
        "/etc/passwd",
        "%2Fetc%2Fpasswd",
        "photos/..%5C..%5Csecret.jpg",
        "photos",
    ],
)
def test_sources_outside_the_root_or_missing_get_404(
    thumbnailer: Thumbnailer, source_dir: Path, cache_dir: Path, source: str
) -> None:
    secret = source_dir.parent / "sources-secret"
    secret.mkdir()
    (secret / "secret.jpg").write_bytes(images.jpeg(64, 48))
    (source_dir / "photos" / "escape.jpg").symlink_to(secret / "secret.jpg")
    reply = get(thumbnailer, f"/rs:fit:50:50/plain/{source}@jpeg")
    assert_rejected(reply, 404, cache_dir)
    assert reply.body == b"Not found\n"


def test_nul_in_the_source_name_is_400(thumbnailer: Thumbnailer, cache_dir: Path) -> None:
    reply = get(thumbnailer, "/rs:fit:50:50/plain/photos/landscape.jpg%00.png@jpeg")
    assert_rejected(reply, 400, cache_dir)


def test_expired_url_gets_404_and_a_future_one_is_served(
    make: Callable[..., Thumbnailer], cache_dir: Path
) -> None:
    thumbnailer = make(clock=lambda: 2_000_000_000.0)
    expired = get(thumbnailer, "/exp:1999999999/rs:fit:50:50/plain/photos/landscape.jpg@jpeg")
    assert_rejected(expired, 404, cache_dir)
    assert expired.body == b"Expired URL\n"
    valid = get(thumbnailer, "/exp:2000000001/rs:fit:50:50/plain/photos/landscape.jpg@jpeg")
    assert valid.status == 200


def test_an_expiring_url_is_cached_no_longer_than_it_has_left(
    make: Callable[..., Thumbnailer], cache_dir: Path
) -> None:
    """The answer must not outlive the URL in any cache, so it is never ``immutable``."""
    now = [2_000_000_000.0]
    thumbnailer = make(clock=lambda: now[0])
    path = "/exp:2000003600/rs:fit:50:50/plain/photos/landscape.jpg@jpeg"
    miss = get(thumbnailer, path)
    assert header(miss, "Cache-Control") == "public, max-age=3600"
    now[0] += 600.5
    hit = get(thumbnailer, path)
    assert header(hit, "Cache-Control") == "public, max-age=2999"
    assert hit.body == miss.body
    now[0] = 2_000_003_601.0
    assert_rejected(get(thumbnailer, path), 404, cache_dir, cached=1)


def test_expiring_and_lasting_urls_of_one_image_share_one_cache_object(
    make: Callable[..., Thumbnailer], cache: CountingCacheStore
) -> None:
    thumbnailer = make(clock=lambda: 2_000_000_000.0)
    lasting = get(thumbnailer, CONTROL)
    expiring = get(thumbnailer, "/exp:2000003600" + CONTROL)
    assert header(lasting, "Cache-Control") == "public, max-age=31536000, immutable"
    assert header(expiring, "Cache-Control") == "public, max-age=3600"
    assert header(lasting, "ETag") == header(expiring, "ETag")
    assert cache.puts == 1


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS"])
def test_other_methods_get_405(
    thumbnailer: Thumbnailer, sources: CountingSourceStore, cache_dir: Path, method: str
) -> None:
    reply = get(thumbnailer, CONTROL, method=method)
    assert reply.status == 405
    assert header(reply, "Allow") == "GET, HEAD"
    assert header(reply, "Cache-Control") == "no-store"
    assert sources.reads == 0
    assert cached_files(cache_dir) == []


# -- bad source bytes ----------------------------------------------------------------

SVG = (
    b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" width="64" height="64">'
    b'<rect width="64" height="64" fill="red"/></svg>'
)
PPM = b"P6\n4 4\n255\n" + bytes(range(48))
RANDOM = bytes((index * 197 + 89) % 256 for index in range(1024))
HTML = b"<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>"


def truncated_jpeg() -> bytes:
    data = images.jpeg(640, 480)
    return data[: len(data) // 2]


#: A format we recognise but block is UnsupportedFormat (415); bytes that are
#: no image at all, or a known format that fails to decode, are InvalidImage
#: (422), as bad inputs 35 and 34 of docs/security.md say.
BAD_SOURCES = [
    ("svg", SVG, 415),
    ("ppm", PPM, 415),
    ("random", RANDOM, 422),
    ("empty", b"", 422),
    ("html", HTML, 422),
    ("truncated-jpeg", truncated_jpeg(), 422),
]


@pytest.mark.parametrize(("name", "data", "status"), BAD_SOURCES)
def test_bad_source_bytes_are_refused_and_nothing_is_cached(
    thumbnailer: Thumbnailer, source_dir: Path, cache_dir: Path, name: str, data: bytes, status: int
) -> None:
    (source_dir / f"{name}.jpg").write_bytes(data)
    reply = get(thumbnailer, f"/rs:fit:100:100/plain/{name}.jpg@jpeg")
    assert_rejected(reply, status, cache_dir)
    assert not list(cache_dir.rglob(TEMP_PREFIX + "*")) if cache_dir.exists() else True
    # The worker survives: the next request is served.
    assert get(thumbnailer, CONTROL).status == 200


@pytest.mark.parametrize(("name", "data"), [("random", RANDOM), ("empty", b"")])
def test_undecodable_bytes_get_422(
    thumbnailer: Thumbnailer, source_dir: Path, name: str, data: bytes
) -> None:
    (source_dir / f"{name}.jpg").write_bytes(data)
    assert get(thumbnailer, f"/rs:fit:100:100/plain/{name}.jpg@jpeg").status == 422


def test_source_over_the_byte_limit_gets_422_without_rendering(
    make: Callable[..., Thumbnailer], cache_dir: Path
) -> None:
    thumbnailer = make(max_src_file_size=1000)
    reply = get(thumbnailer, CONTROL)
    assert_rejected(reply, 422, cache_dir)
    assert thumbnailer.renders == 0


def test_source_over_the_pixel_limit_gets_422_without_rendering(
    make: Callable[..., Thumbnailer], cache_dir: Path
) -> None:
    thumbnailer = make(max_src_resolution=640 * 480 - 1)
    reply = get(thumbnailer, CONTROL)
    assert_rejected(reply, 422, cache_dir)
    assert thumbnailer.renders == 0


# -- overload ------------------------------------------------------------------------


class BlockedRender:
    """Replace ``pipeline.render`` with one that waits for :attr:`release`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        real = pipeline.render

        def render(*args: Any, **kwargs: Any) -> pipeline.Rendered:
            self.started.set()
            assert self.release.wait(JOIN_TIMEOUT), "the test never released the render"
            return real(*args, **kwargs)

        monkeypatch.setattr(pipeline, "render", render)


def in_thread(fn: Callable[[], Reply]) -> tuple[threading.Thread, list[Reply]]:
    replies: list[Reply] = []
    thread = threading.Thread(target=lambda: replies.append(fn()))
    thread.start()
    return thread, replies


def test_a_full_queue_gets_429_with_retry_after(
    make: Callable[..., Thumbnailer], monkeypatch: pytest.MonkeyPatch, cache_dir: Path
) -> None:
    blocked = BlockedRender(monkeypatch)
    thumbnailer = make(workers=1, queue_size=0)
    thread, replies = in_thread(lambda: get(thumbnailer, CONTROL))
    try:
        assert blocked.started.wait(JOIN_TIMEOUT)
        other = get(thumbnailer, "/rs:fit:100:100/plain/photos/landscape.jpg@jpeg")
        assert other.status == 429
        assert header(other, "Retry-After") == "1"
        assert header(other, "Cache-Control") == "no-store"
    finally:
        blocked.release.set()
        thread.join(JOIN_TIMEOUT)
    assert [reply.status for reply in replies] == [200]
    assert len(cached_files(cache_dir)) == 1  # only the admitted job's result


def test_a_job_waiting_past_the_queue_timeout_gets_503_with_retry_after(
    make: Callable[..., Thumbnailer], monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = BlockedRender(monkeypatch)
    thumbnailer = make(workers=1, queue_size=1, queue_timeout=JOIN_TIMEOUT)
    thread, replies = in_thread(lambda: get(thumbnailer, CONTROL))
    try:
        assert blocked.started.wait(JOIN_TIMEOUT)
        # The short deadline is for the request meant to miss it: the first,
        # given 0.05 s too, could miss its own start on a busy machine.
        thumbnailer.executor.queue_timeout = 0.05
        waited = get(thumbnailer, "/rs:fit:100:100/plain/photos/landscape.jpg@jpeg")
        assert waited.status == 503
        assert header(waited, "Retry-After") == "2"
        assert header(waited, "Cache-Control") == "no-store"
    finally:
        blocked.release.set()
        thread.join(JOIN_TIMEOUT)
    assert [reply.status for reply in replies] == [200]


# -- concurrency and cache faults ----------------------------------------------------


def test_twenty_concurrent_identical_requests_render_and_read_once(
    thumbnailer: Thumbnailer, sources: CountingSourceStore, cache_dir: Path
) -> None:
    """Bad input 46 (docs/security.md)."""
    barrier = threading.Barrier(20)
    replies: list[Reply] = []
    lock = threading.Lock()

    def request() -> None:
        barrier.wait(JOIN_TIMEOUT)
        reply = get(thumbnailer, CONTROL)
        data = body_of(reply)
        with lock:
            replies.append(Reply(reply.status, reply.headers, data))

    threads = [threading.Thread(target=request) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT)
    assert [reply.status for reply in replies] == [200] * 20
    assert len({reply.body for reply in replies}) == 1
    assert thumbnailer.renders == 1
    assert sources.reads == 1
    assert len(cached_files(cache_dir)) == 1


def test_a_request_that_missed_just_before_a_flight_ended_does_not_render_again(
    thumbnailer: Thumbnailer, cache: CountingCacheStore, sources: CountingSourceStore
) -> None:
    """A miss seen before the leader stored its result must not start a second render.

    The late request's cache lookup is held (after it found nothing) until the
    first request has finished, so it reaches single-flight after the flight is
    over; it must then find the stored result instead of rendering again.
    """
    first_done = threading.Event()

    def hold_late_miss(found: CachedResult | None) -> None:
        if threading.current_thread().name == "late" and found is None and not first_done.is_set():
            assert first_done.wait(JOIN_TIMEOUT)

    cache.after_get = hold_late_miss
    late_replies: list[Reply] = []
    late = threading.Thread(
        target=lambda: late_replies.append(get(thumbnailer, CONTROL)), name="late"
    )
    late.start()
    try:
        first = get(thumbnailer, CONTROL)
    finally:
        first_done.set()
        late.join(JOIN_TIMEOUT)
    assert first.status == 200
    [late_reply] = late_replies
    assert body_of(late_reply) == first.body
    assert thumbnailer.renders == 1
    assert sources.reads == 1


def test_a_failing_cache_write_still_serves_from_memory(
    thumbnailer: Thumbnailer, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bad input 48: a read-only or full cache disk costs caching, not the answer."""
    import errno
    import tempfile

    def read_only(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    first = get(thumbnailer, CONTROL)
    second = get(thumbnailer, CONTROL)
    assert first.status == second.status == 200
    assert first.body == second.body
    assert decode(first.body).width == 200
    assert cached_files(cache_dir) == []
    assert thumbnailer.renders == 2


def test_a_cache_root_that_is_a_file_still_serves_from_memory(
    sources: CountingSourceStore, tmp_path: Path, executors: list[Executor]
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_bytes(b"")
    executor = Executor(1, 4, 5.0, 512 * MIB)
    executors.append(executor)
    thumbnailer = Thumbnailer(
        ThumbnailerConfig(), SIGNER, {"": sources}, FileSystemCacheStore(blocker), executor
    )
    reply = get(thumbnailer, CONTROL)
    assert reply.status == 200
    assert decode(reply.body).width == 200
    assert blocker.read_bytes() == b""


# -- the quality autoquality chose ----------------------------------------------------

#: Sizes of CONTROL whose quality ``autoquality`` searches, by each method.
SEARCHED = {
    "size": "/rs:fit:200:200/aq:size:5000:40:90/plain/photos/landscape.jpg@jpeg",
    "dssim": "/rs:fit:200:200/aq:dssim:0.02:40:90/plain/photos/landscape.jpg@webp",
    # format:best searches each candidate format; the winner's quality is sent.
    "best": "/rs:fit:200:200/aq:dssim:0.02:40:90/plain/photos/landscape.jpg@best",
}


def sidecar_of(cache_dir: Path) -> Path:
    """The quality sidecar beside the one result under ``cache_dir``."""
    [result] = [path for path in cached_files(cache_dir) if path.suffix != ".quality"]
    return result.with_name(result.name + ".quality")


@pytest.mark.parametrize("method", sorted(SEARCHED))
def test_the_searched_quality_is_sent_on_the_miss_and_on_every_hit(
    make: Callable[..., Thumbnailer], cache_dir: Path, method: str
) -> None:
    thumbnailer = make()
    path = SEARCHED[method]
    miss = get(thumbnailer, path)
    quality = header(miss, "X-Oximg-Quality")
    assert quality is not None and 40 <= int(quality) <= 90
    assert sidecar_of(cache_dir).read_bytes() == quality.encode()
    full = get(thumbnailer, path)  # the full path's hit, which the hit map then keeps
    remembered = get(thumbnailer, path)
    assert len(thumbnailer.hits) == 1
    head = get(thumbnailer, path, "HEAD")
    for hit in (full, remembered, head):
        assert hit.status == 200 and header(hit, "Last-Modified") is not None  # hits
        assert header(hit, "X-Oximg-Quality") == quality
    assert full.body == remembered.body == miss.body
    assert thumbnailer.renders == 1


def test_the_sidecar_is_read_only_for_answers_whose_quality_is_searched(
    make: Callable[..., Thumbnailer], cache: CountingCacheStore
) -> None:
    thumbnailer = make(hit_cache_bytes=0)  # every hit takes the full path
    for _ in range(2):
        plain = get(thumbnailer, CONTROL)
        assert header(plain, "X-Oximg-Quality") is None
    assert len(cache.gets) == 2 and cache.puts == 1  # one lookup each; one result
    cache.gets.clear()
    for _ in range(2):
        searched = get(thumbnailer, SEARCHED["size"])
    assert header(searched, "X-Oximg-Quality") is not None
    assert cache.puts == 3  # the result and its sidecar
    # The miss's lookup; the hit's lookup and its sidecar's.
    assert [key.endswith(".quality") for key in cache.gets] == [False, False, True]


class BytesCacheStore:
    """A result cache that answers with bytes, as any Django storage does (storage.py)."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def get(self, key: str) -> CachedResult | None:
        data = self.objects.get(key)
        return None if data is None else CachedResult(size=len(data), data=data)

    def put(self, key: str, data: bytes) -> None:
        self.objects[key] = data


def test_the_searched_quality_is_sent_on_hits_from_a_store_of_bytes(
    make: Callable[..., Thumbnailer],
) -> None:
    store = BytesCacheStore()
    thumbnailer = make(cache=store)
    miss = get(thumbnailer, SEARCHED["size"])
    hit = get(thumbnailer, SEARCHED["size"])
    assert hit.body == miss.body and thumbnailer.renders == 1
    quality = header(miss, "X-Oximg-Quality")
    assert quality is not None and header(hit, "X-Oximg-Quality") == quality
    assert [key.endswith(".quality") for key in sorted(store.objects)] == [False, True]


@pytest.mark.parametrize("content", [None, b"", b"abc", b"0", b"101", b"7" * 30, b"\xff\x00"])
def test_a_missing_or_garbled_sidecar_gives_no_header_and_no_error(
    make: Callable[..., Thumbnailer], cache_dir: Path, content: bytes | None
) -> None:
    thumbnailer = make(hit_cache_bytes=0)
    miss = get(thumbnailer, SEARCHED["size"])
    assert header(miss, "X-Oximg-Quality") is not None
    sidecar = sidecar_of(cache_dir)
    if content is None:
        sidecar.unlink()
    else:
        sidecar.write_bytes(content)
    hit = get(thumbnailer, SEARCHED["size"])
    assert hit.status == 200 and hit.body == miss.body
    assert header(hit, "X-Oximg-Quality") is None
    assert thumbnailer.renders == 1


def test_a_sidecar_that_cannot_be_written_stores_no_result(
    make: Callable[..., Thumbnailer], cache: CountingCacheStore, cache_dir: Path
) -> None:
    """No result is stored without its quality: it would be served without the header."""

    def refuse_sidecars(key: str, data: bytes) -> None:
        if key.endswith(".quality"):
            raise OSError("sidecar refused")
        FileSystemCacheStore(cache_dir).put(key, data)

    cache.put = refuse_sidecars  # type: ignore[method-assign]
    thumbnailer = make()
    reply = get(thumbnailer, SEARCHED["size"])
    assert reply.status == 200 and header(reply, "X-Oximg-Quality") is not None
    assert cached_files(cache_dir) == []
    assert get(thumbnailer, CONTROL).status == 200
    assert len(cached_files(cache_dir)) == 1  # answers without a search are stored


# -- when the source is read ----------------------------------------------------------


@pytest.mark.parametrize("read_on_worker", [True, False])
def test_a_local_source_is_read_only_once_a_worker_takes_the_job(
    make: Callable[..., Thumbnailer], sources: CountingSourceStore, read_on_worker: bool
) -> None:
    """Queued requests for local sources hold no bytes; remote ones are read first."""
    sources.read_on_worker = read_on_worker
    thumbnailer = make(workers=1)
    release = threading.Event()

    def until(state: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + 10
        while not state():
            assert time.monotonic() < deadline, what
            time.sleep(0.001)

    blocker = threading.Thread(target=thumbnailer.executor.run, args=(lambda: release.wait(10),))
    blocker.start()
    replies: list[Reply] = []
    request = threading.Thread(target=lambda: replies.append(get(thumbnailer, CONTROL)))
    try:
        until(lambda: thumbnailer.executor.stats().running == 1, "the blocker never ran")
        request.start()
        until(lambda: thumbnailer.executor.stats().queued == 1, "the request never queued")
        assert sources.reads == (0 if read_on_worker else 1)
    finally:
        release.set()
        blocker.join(10)
        if request.ident is not None:  # started
            request.join(10)
    assert replies[0].status == 200 and sources.reads == 1


def test_the_memory_estimate_plans_with_the_configured_result_limit(
    make: Callable[..., Thumbnailer], source_dir: Path
) -> None:
    """The estimate covers the output the render will make, not one clamped to 8192 px.

    With ``MAX_RESULT_DIMENSION`` 16384, ``w:16000/el:1`` on a 2000x1333 PNG
    makes a 16000x10664 result; an estimate planned with the default limit
    (8192) saw 8192x5460, a quarter of it (193 against 673 MiB).
    """
    (source_dir / "wide.png").write_bytes(bytes(images.photo(2000, 1333).pngsave_buffer()))
    thumbnailer = make(render=pipeline.RenderSettings(max_result_dimension=16384))
    job = thumbnailer.job_for(SIGNER.signed_path("/w:16000/el:1/plain/wide.png@png"), "")
    with thumbnailer.executor.admit() as admission:
        cost = thumbnailer.maker.stage(job, admission).cost
    assert cost > 16000 * 10664 * budget.OUTPUT_BYTES_PER_PIXEL["png"]


# -- encoding variants (bad input 7) --------------------------------------------------

VARIANTS = [
    "/rs:fit:200:200/plain/photos/landscape.jpg@jpeg",
    "/rs:fit:200:200/plain/photos%2Flandscape.jpg@jpeg",
    "/rs:fit:200:200/plain/photos%2flandscape.jpg@jpeg",
    "/rs:fit:200:200/plain/photos/landscap%65.jpg@jpeg",
    "/rs:fit:200:200//plain/photos/landscape.jpg@jpeg",
    "/rs:fit:200:200/plain/photos//landscape.jpg@jpeg",
    "/rs:fit:200:200/plain/photos/landscape.jpg@jpeg/",
    "/rs:fit:200:200/plain/photos/landscape.jpg@jpg",
    "/w:200/h:200/plain/photos/landscape.jpg@jpeg",
    "/h:200/w:200/plain/photos/landscape.jpg@jpeg",
    "/rs:fit:200:200/f:jpeg/plain/photos/landscape.jpg",
    "/rs%3afit%3a200%3a200/plain/photos/landscape.jpg@jpeg",
    "/s:200:200/rt:fit/plain/photos/landscape.jpg@jpeg",
]


def test_signed_encoding_variants_share_one_cache_object(
    thumbnailer: Thumbnailer, cache_dir: Path
) -> None:
    statuses = {path: get(thumbnailer, path).status for path in VARIANTS}
    assert set(statuses.values()) <= {200, 400, 404}, statuses
    assert statuses[VARIANTS[0]] == 200
    assert len(cached_files(cache_dir)) == 1


def test_variants_under_the_original_signature_are_forbidden(
    thumbnailer: Thumbnailer, cache_dir: Path
) -> None:
    signature = SIGNER.sign(VARIANTS[0])
    for path in VARIANTS[1:]:
        assert thumbnailer.reply(f"/{signature}{path}", "GET", {}).status == 403, path
    assert cached_files(cache_dir) == []


# -- what proxies do to paths, repaired as imgproxy repairs them ------------------------

#: VARIANTS[0] as a browser or proxy may pass it on; imgproxy reads each as the
#: original before it checks the signature (core/signing.restored_path).
REWRITTEN = [
    "/rs%3Afit%3A200%3A200/plain/photos/landscape.jpg@jpeg",
    "/rs:fit%3A200:200/plain/photos/landscape.jpg@jpeg",
]


@pytest.mark.parametrize("rewritten", REWRITTEN)
def test_rewritten_paths_verify_under_the_original_signature(
    thumbnailer: Thumbnailer, cache_dir: Path, rewritten: str
) -> None:
    signature = SIGNER.sign(VARIANTS[0])
    original = get(thumbnailer, VARIANTS[0])
    reply = thumbnailer.reply(f"/{signature}{rewritten}", "GET", {})
    assert reply.status == 200
    assert body_of(reply) == original.body
    assert header(reply, "ETag") == header(original, "ETag")
    assert len(cached_files(cache_dir)) == 1
    # A signature over the spelling as sent covers a path imgproxy never checks.
    assert thumbnailer.reply(SIGNER.signed_path(rewritten), "GET", {}).status == 403


def test_empty_options_segment_renders_unsigned(make: Callable[..., Thumbnailer]) -> None:
    # imgproxy v4 renders /unsafe//plain/...: the empty segment is not an option.
    thumbnailer = make(allow_unsigned=True)
    reply = thumbnailer.reply("/unsafe//plain/photos/landscape.jpg@png", "GET", {})
    assert reply.status == 200
    image = decode(body_of(reply))
    assert (image.width, image.height) == (640, 480)


def test_empty_options_segment_shares_the_signature_of_no_options(
    thumbnailer: Thumbnailer, cache_dir: Path
) -> None:
    path = "/plain/photos/landscape.jpg@png"
    signature = SIGNER.sign(path)
    for sent in (f"/{signature}/{path}", f"/{signature}{path}"):
        reply = thumbnailer.reply(sent, "GET", {})
        assert reply.status == 200
        body_of(reply)
    assert len(cached_files(cache_dir)) == 1
    assert thumbnailer.reply(SIGNER.signed_path("/" + path), "GET", {}).status == 403


def test_collapsed_scheme_of_a_url_source_is_repaired(
    sources: CountingSourceStore, cache: CountingCacheStore, executors: list[Executor]
) -> None:
    executor = Executor(1, 4, 5.0, 64 * MIB)
    executors.append(executor)
    remote = HttpSourceStore(HttpSourceConfig(prefixes=("https://images.example/",)))
    thumbnailer = Thumbnailer(
        ThumbnailerConfig(), SIGNER, {"": sources, URL_ALIAS: remote}, cache, executor
    )
    url = "/rs:fit:200:200/plain/https://images.example/a.jpg"
    signature = SIGNER.sign(url)
    collapsed = thumbnailer.job_for(f"/{signature}{url.replace('https://', 'https:/')}", "")
    assert (collapsed.source.alias, collapsed.source.name) == (
        URL_ALIAS,
        "https://images.example/a.jpg",
    )
    assert collapsed.key == thumbnailer.job_for(f"/{signature}{url}", "").key
    assert sources.reads == 0


# -- bounds: encode time, admission, log lines ------------------------------------------


def test_a_result_whose_encoder_would_outlast_the_deadline_is_refused_up_front(
    make: Callable[..., Thumbnailer], sources: CountingSourceStore, cache_dir: Path
) -> None:
    """A GIF of 8192x6144 would take the encoder alone longer than the deadline: 422."""
    thumbnailer = make(render_timeout=10.0)
    reply = get(thumbnailer, "/rs:fit:8192:8192/el:1/plain/photos/landscape.jpg@gif")
    assert (reply.status, reply.body) == (422, b"Result image is too large\n")
    assert header(reply, "Cache-Control") == "no-store"
    assert thumbnailer.renders == 0 and cached_files(cache_dir) == []
    assert thumbnailer.executor.stats().completed == 0  # refused before a worker
    small = get(thumbnailer, "/rs:fit:200:200/plain/photos/landscape.jpg@gif")
    assert small.status == 200


def test_a_request_refused_by_a_full_executor_reads_nothing(
    make: Callable[..., Thumbnailer], sources: CountingSourceStore
) -> None:
    """The place is taken before the source is read (these sources read like remote ones)."""
    thumbnailer = make(workers=1, queue_size=0)
    with thumbnailer.executor.admit():  # someone else holds the only place
        reply = get(thumbnailer, CONTROL)
    assert reply.status == 429
    assert sources.reads == 0
    assert get(thumbnailer, CONTROL).status == 200


def test_log_lines_escape_what_the_request_carries(
    thumbnailer: Thumbnailer, caplog: pytest.LogCaptureFixture
) -> None:
    """A signed source name with a line break cannot forge a line of the log."""
    forged = "photos/x.jpg\r\nERROR django_oximg forged entry\x1b[2J"
    with caplog.at_level(logging.INFO, logger="django_oximg"):
        reply = get(thumbnailer, f"/rs:fit:50:50/plain/{quote(forged, safe='/')}@jpeg")
    assert reply.status == 404
    [record] = caplog.records
    line = record.getMessage()
    assert "\r" not in line and "\n" not in line and "\x1b" not in line
    assert "forged entry" in line  # kept, on the one line, escaped
