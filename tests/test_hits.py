"""Tests for django_oximg.core.serving.hits: repeated hits answered from memory, exactly.

Most tests run two thumbnailers over one source directory and one result
cache: ``remembering`` (the default, with its map of hits) and ``looking_up``
(``hit_cache_bytes=0``: every request takes the full path). Whatever the map
answers must be what the full lookup answers, header for header and byte
for byte. Files are removed and replaced behind the map's back, as a purge
or a render in another process would.
"""

from __future__ import annotations

import functools
import os
import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from django_oximg.core import pipeline
from django_oximg.core.serving.handler import Thumbnailer
from django_oximg.core.serving.hits import ENTRY_OVERHEAD, CachedFile, HitCache
from django_oximg.core.serving.negotiation import accept_class
from django_oximg.core.serving.replies import Reply
from django_oximg.core.stores.disk import FileSystemCacheStore, write_atomically
from django_oximg.core.stores.protocols import CachedResult
from tests import images
from tests.constants import MIB, SIGNER

FIXED = "/rs:fit:200:200/plain/photos/landscape.jpg@jpeg"
NEGOTIATED = "/rs:fit:200:200/plain/photos/landscape.jpg"
#: 2026-01-01 00:00 UTC: the clock of these tests, so expiring URLs are exact.
NOW = 1_767_225_600.0

#: Stands for the answer's own ETag in the request headers below.
ITS_ETAG = "<its etag>"

#: Requests a remembered hit must answer exactly as the full lookup does.
REQUESTS = {
    "GET": ("GET", {}),
    "HEAD": ("HEAD", {}),
    "If-None-Match, its ETag": ("GET", {"HTTP_IF_NONE_MATCH": ITS_ETAG}),
    "If-None-Match, its ETag, HEAD": ("HEAD", {"HTTP_IF_NONE_MATCH": ITS_ETAG}),
    "If-None-Match, another": ("GET", {"HTTP_IF_NONE_MATCH": '"other"'}),
    "If-Modified-Since, later": (
        "GET",
        {"HTTP_IF_MODIFIED_SINCE": "Fri, 01 Jan 2100 00:00:00 GMT"},
    ),
    "If-Modified-Since, earlier": (
        "GET",
        {"HTTP_IF_MODIFIED_SINCE": "Thu, 01 Jan 1970 00:00:00 GMT"},
    ),
    "Range, first 100": ("GET", {"HTTP_RANGE": "bytes=0-99"}),
    "Range, last 10": ("GET", {"HTTP_RANGE": "bytes=-10"}),
    "Range, past the end": ("GET", {"HTTP_RANGE": "bytes=99999999-"}),
    "Range, malformed": ("GET", {"HTTP_RANGE": "lines=1-2"}),
    "Range, HEAD": ("HEAD", {"HTTP_RANGE": "bytes=0-99"}),
}

#: Accept headers of the three format classes (none, WebP, AVIF).
ACCEPTS = {"neither": "*/*", "webp": "image/webp,*/*", "avif": "image/avif,image/webp,*/*"}


@pytest.fixture
def source_dir(source_dir: Path) -> Path:
    """conftest's sources, and a second photo."""
    (source_dir / "photos" / "other.jpg").write_bytes(images.jpeg(320, 240))
    return source_dir


@pytest.fixture
def make(make: Callable[..., Thumbnailer]) -> Callable[..., Thumbnailer]:
    """Thumbnailers over the same sources and result cache, on this module's clock."""
    return functools.partial(make, clock=lambda: NOW, budget=256 * MIB)


@pytest.fixture
def remembering(make: Callable[..., Thumbnailer]) -> Thumbnailer:
    return make()


@pytest.fixture
def looking_up(make: Callable[..., Thumbnailer]) -> Thumbnailer:
    return make(hit_cache_bytes=0)


def ask(thumbnailer: Thumbnailer, path: str, method: str = "GET", **headers: str) -> Reply:
    """The reply for ``path`` (signed here), with any file read into ``body`` and closed."""
    reply = thumbnailer.reply(SIGNER.signed_path(path), method, headers)
    if reply.file is None:
        return reply
    with reply.file as handle:
        return Reply(reply.status, reply.headers, handle.read())


def header(reply: Reply, name: str) -> str | None:
    found = [value for key, value in reply.headers if key.lower() == name.lower()]
    return found[0] if found else None


def remembered_hit(thumbnailer: Thumbnailer, path: str, **headers: str) -> Reply:
    """Make ``path`` a cached file the map remembers; the second (filling) answer."""
    assert ask(thumbnailer, path, **headers).status == 200  # the miss: rendered, cached
    filled = ask(thumbnailer, path, **headers)  # the first hit: looked up, remembered
    assert filled.status == 200
    assert thumbnailer.hits.lookup(SIGNER.signed_path(path), headers.get("HTTP_ACCEPT", ""))
    return filled


def full_path_refused(thumbnailer: Thumbnailer, monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on, ``thumbnailer`` fails any request that takes the full path."""

    def refuse(*args: Any) -> None:
        raise AssertionError("took the full path")

    monkeypatch.setattr(thumbnailer, "job_for", refuse)


def answered_as_the_lookup(
    remembering: Thumbnailer,
    looking_up: Thumbnailer,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    request_name: str,
    filled: Reply,
) -> tuple[Reply, Reply]:
    """The request ``request_name`` for ``path`` (remembered as ``filled``) answered by
    the lookup, then from memory with the full path refused: (memory's, the lookup's),
    checked to be the same status, headers and body."""
    method, headers = REQUESTS[request_name]
    headers = {k: header(filled, "ETag") or "" if v == ITS_ETAG else v for k, v in headers.items()}
    expected = ask(looking_up, path, method, **headers)
    full_path_refused(remembering, monkeypatch)
    answer = ask(remembering, path, method, **headers)
    assert (answer.status, answer.headers, answer.body) == (
        expected.status,
        expected.headers,
        expected.body,
    )
    return answer, expected


# -- the same answers ---------------------------------------------------------------------


@pytest.mark.parametrize("request_name", sorted(REQUESTS))
def test_a_remembered_hit_answers_exactly_as_the_lookup_does(
    remembering: Thumbnailer,
    looking_up: Thumbnailer,
    monkeypatch: pytest.MonkeyPatch,
    request_name: str,
) -> None:
    filled = remembered_hit(remembering, FIXED)
    _answer, expected = answered_as_the_lookup(
        remembering, looking_up, monkeypatch, FIXED, request_name, filled
    )
    assert expected.status in (200, 206, 304, 416)


#: FIXED with its quality searched: its answers carry X-Oximg-Quality.
SEARCHED = "/rs:fit:200:200/aq:size:5000:40:90/plain/photos/landscape.jpg@jpeg"


@pytest.mark.parametrize("request_name", sorted(REQUESTS))
def test_a_remembered_hit_sends_the_searched_quality_as_the_lookup_does(
    remembering: Thumbnailer,
    looking_up: Thumbnailer,
    monkeypatch: pytest.MonkeyPatch,
    request_name: str,
) -> None:
    """The header is built into the entry: a remembered hit reads no sidecar (nor anything)."""
    filled = remembered_hit(remembering, SEARCHED)
    quality = header(filled, "X-Oximg-Quality")
    assert quality is not None and 40 <= int(quality) <= 90
    answer, _expected = answered_as_the_lookup(
        remembering, looking_up, monkeypatch, SEARCHED, request_name, filled
    )
    if answer.status in (200, 206):
        assert header(answer, "X-Oximg-Quality") == quality


@pytest.mark.parametrize("accept_name", sorted(ACCEPTS))
def test_a_negotiated_url_is_remembered_per_format_class(
    remembering: Thumbnailer,
    looking_up: Thumbnailer,
    monkeypatch: pytest.MonkeyPatch,
    accept_name: str,
) -> None:
    if accept_name == "avif" and not pipeline.saver_available("avif"):
        pytest.skip("this libvips has no AVIF saver (heifsave)")
    for accept in ACCEPTS.values():  # every class remembered under the one path
        if "avif" not in accept_class(accept) or pipeline.saver_available("avif"):
            remembered_hit(remembering, NEGOTIATED, HTTP_ACCEPT=accept)
    accept = ACCEPTS[accept_name]
    expected = ask(looking_up, NEGOTIATED, HTTP_ACCEPT=accept)
    full_path_refused(remembering, monkeypatch)
    answer = ask(remembering, NEGOTIATED, HTTP_ACCEPT=accept)
    assert (answer.status, answer.headers, answer.body) == (
        expected.status,
        expected.headers,
        expected.body,
    )
    assert header(answer, "Vary") == "Accept"
    assert (
        header(answer, "Content-Type")
        == {
            "neither": "image/jpeg",
            "webp": "image/webp",
            "avif": "image/avif",
        }[accept_name]
    )
    assert len(remembering.hits) == 1  # one path, one entry


#: Accept headers an animated source's negotiated URL answers differently.
ANIMATED_ACCEPTS = {
    "avif and webp": ("image/avif,image/webp,*/*", "image/webp"),
    "avif alone": ("image/avif,*/*", "image/gif"),
    "neither": ("*/*", "image/gif"),
}


@pytest.mark.parametrize("first", sorted(ANIMATED_ACCEPTS))
def test_an_animated_source_is_never_remembered_as_avif(
    remembering: Thumbnailer, looking_up: Thumbnailer, monkeypatch: pytest.MonkeyPatch, first: str
) -> None:
    """A GIF's negotiated URL: WebP or GIF by Accept, each class its own entry."""
    path = "/rs:fit:100:100/plain/photos/anim.gif"
    order = [first, *(name for name in sorted(ANIMATED_ACCEPTS) if name != first)]
    for name in order:
        remembered_hit(remembering, path, HTTP_ACCEPT=ANIMATED_ACCEPTS[name][0])
    full_path_refused(remembering, monkeypatch)
    for name in order:
        accept, content_type = ANIMATED_ACCEPTS[name]
        expected = ask(looking_up, path, HTTP_ACCEPT=accept)
        answer = ask(remembering, path, HTTP_ACCEPT=accept)
        assert (answer.status, answer.headers, answer.body) == (
            expected.status,
            expected.headers,
            expected.body,
        )
        assert header(answer, "Content-Type") == content_type


def test_a_result_too_big_to_hold_is_remembered_and_sent_from_disk(
    make: Callable[..., Thumbnailer], looking_up: Thumbnailer, monkeypatch: pytest.MonkeyPatch
) -> None:
    remembering = make(hit_cache_bytes=64 * 1024)  # bodies up to 2 KiB, less than this one
    remembered_hit(remembering, FIXED)
    [found] = [f for route in remembering.hits._routes.values() for f in route.files.values()]
    assert found.body is None
    full_path_refused(remembering, monkeypatch)
    reply = remembering.reply(SIGNER.signed_path(FIXED), "GET", {})
    assert reply.file is not None
    with reply.file as handle:
        body = handle.read()
    expected = ask(looking_up, FIXED)
    assert (reply.status, reply.headers, body) == (200, expected.headers, expected.body)


def test_with_no_memory_nothing_is_remembered(looking_up: Thumbnailer) -> None:
    for _ in range(3):
        assert ask(looking_up, FIXED).status == 200
    assert len(looking_up.hits) == 0
    assert looking_up.hits.used == 0


# -- what is never answered from memory ---------------------------------------------------


def test_a_url_that_expires_is_never_remembered_and_still_expires(
    make: Callable[..., Thumbnailer],
) -> None:
    now = [NOW]
    thumbnailer = make(clock=lambda: now[0])
    path = f"/exp:{int(NOW) + 100}" + FIXED
    assert header(ask(thumbnailer, path), "Cache-Control") == "public, max-age=100"
    now[0] += 40
    hit = ask(thumbnailer, path)
    assert header(hit, "Last-Modified") is not None  # a hit, from the file
    assert header(hit, "Cache-Control") == "public, max-age=60"
    assert len(thumbnailer.hits) == 0
    now[0] += 61
    assert ask(thumbnailer, path).status == 404


@pytest.mark.parametrize(
    ("method", "headers", "status"),
    [
        ("GET", {"QUERY_STRING": "x=1"}, 404),
        ("GET", {"RAW_URI": "/img/x?"}, 404),
        ("POST", {}, 405),
        ("DELETE", {}, 405),
    ],
)
def test_a_remembered_path_is_still_refused_with_a_query_or_another_method(
    remembering: Thumbnailer, method: str, headers: dict[str, str], status: int
) -> None:
    remembered_hit(remembering, FIXED)
    assert ask(remembering, FIXED, method, **headers).status == status


# -- files that go away or change ---------------------------------------------------------


def cached_file(cache_dir: Path) -> Path:
    [found] = [p for p in cache_dir.rglob("*") if p.is_file()]
    return found


def test_a_purged_file_is_rendered_again_never_a_404(
    remembering: Thumbnailer, cache_dir: Path
) -> None:
    """Another process purged it: the map notices on the next hit."""
    first = remembered_hit(remembering, FIXED)
    cached_file(cache_dir).unlink()
    again = ask(remembering, FIXED)
    assert again.status == 200
    assert again.body == first.body  # rendering is deterministic
    assert remembering.renders == 2
    assert len(remembering.hits) == 0
    assert cached_file(cache_dir).read_bytes() == first.body


def test_a_file_rendered_again_answers_with_its_own_last_modified(
    remembering: Thumbnailer, looking_up: Thumbnailer, cache_dir: Path
) -> None:
    """A peer purged and rendered it again: a new file under the same key."""
    first = remembered_hit(remembering, FIXED)
    path = cached_file(cache_dir)
    write_atomically(path, first.body)
    os.utime(path, (NOW + 3600, NOW + 3600))
    answer = ask(remembering, FIXED)
    expected = ask(looking_up, FIXED)
    assert header(answer, "Last-Modified") == "Thu, 01 Jan 2026 01:00:00 GMT"
    assert (answer.status, answer.headers, answer.body) == (
        expected.status,
        expected.headers,
        expected.body,
    )
    assert ask(remembering, FIXED).headers == expected.headers  # remembered anew
    assert remembering.renders == 1


class VanishingCacheStore(FileSystemCacheStore):
    """Finds the file, then loses it before it is opened (a purge in between)."""

    def get(self, key: str) -> CachedResult | None:
        found = super().get(key)
        if found is not None and found.path is not None:
            os.unlink(found.path)
        return found


def test_a_file_removed_between_lookup_and_open_is_made_again(
    make: Callable[..., Thumbnailer], cache_dir: Path
) -> None:
    thumbnailer = make(cache=VanishingCacheStore(cache_dir))
    first = ask(thumbnailer, FIXED)
    again = ask(thumbnailer, FIXED)  # found, then gone: rendered again
    assert first.status == again.status == 200
    assert again.body == first.body
    assert thumbnailer.renders == 2
    assert len(thumbnailer.hits) == 0


def test_a_range_on_a_file_gone_since_the_stat_is_made_again(
    remembering: Thumbnailer, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stat passed, the file went before whitenoise opened it: rendered, not a 500."""
    first = remembered_hit(remembering, FIXED)
    path = cached_file(cache_dir)
    monkeypatch.setattr(CachedFile, "is_current", lambda self: True)
    path.unlink()
    answer = ask(remembering, FIXED, HTTP_RANGE="bytes=0-9")
    assert answer.status == 200  # a fresh render is answered whole, from memory
    assert answer.body == first.body


# -- the map itself -----------------------------------------------------------------------


@pytest.fixture
def files(tmp_path: Path) -> list[CachedFile]:
    """Ten loaded files of 1000 bytes, under two source directories."""
    loaded = []
    for index in range(10):
        key = f"{'ab' if index < 5 else 'cd'}/{index:040x}.jpeg"
        path = tmp_path / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes([index]) * 1000)
        found = CachedFile.load(key, str(path), [("Content-Type", "image/jpeg")], 4096)
        assert found is not None
        loaded.append(found)
    return loaded


def test_the_map_keeps_the_most_recently_used_within_its_bytes(files: list[CachedFile]) -> None:
    charge = ENTRY_OVERHEAD + 1000
    hits = HitCache(3 * charge, accept_class)
    for index, found in enumerate(files[:3]):
        hits.remember(f"/p{index}", False, "", found)
    assert hits.lookup("/p0", "") is files[0]  # now the most recently used
    hits.remember("/p3", False, "", files[3])
    assert hits.lookup("/p1", "") is None  # the least recently used went
    assert [hits.lookup(f"/p{i}", "") for i in (0, 2, 3)] == [files[0], files[2], files[3]]
    assert hits.used == 3 * charge


def test_forgetting_a_source_directory_drops_only_its_entries(files: list[CachedFile]) -> None:
    hits = HitCache(1024 * 1024, accept_class)
    for index, found in enumerate(files):
        hits.remember(f"/p{index}", False, "", found)
    assert hits.forget_under("ab") == 5
    assert [hits.lookup(f"/p{i}", "") is not None for i in range(10)] == [False] * 5 + [True] * 5
    assert hits.used == 5 * files[0].charge


def test_the_map_stays_consistent_under_concurrent_use(files: list[CachedFile]) -> None:
    hits = HitCache(4 * files[0].charge, accept_class)
    failures: list[BaseException] = []

    def churn(seed: int) -> None:
        chance = random.Random(seed)
        try:
            for _ in range(2000):
                path = f"/p{chance.randrange(6)}"
                found = chance.choice(files)
                action = chance.randrange(4)
                if action == 0:
                    hits.remember(
                        path, chance.random() < 0.5, chance.choice(list(ACCEPTS.values())), found
                    )
                elif action == 1:
                    hits.forget(path, found)
                elif action == 2:
                    hits.forget_under("ab")
                else:
                    hits.lookup(path, "*/*")
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=churn, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert hits.used == sum(route.charge for route in hits._routes.values())
    assert hits.used <= hits.capacity


# -- Django: purges and settings ----------------------------------------------------------


@pytest.fixture
def client() -> Any:
    from django.test import Client

    return Client()


def django_url(path: str) -> str:
    from django_oximg import runtime

    return "/img" + runtime.get_signer().signed_path(path)


def test_a_purge_in_this_process_forgets_the_sources_hits(media: Path, client: Any) -> None:
    from django_oximg import runtime
    from django_oximg.purge import purge_source

    url = django_url(FIXED)
    for _ in range(2):
        assert client.get(url, RAW_URI=url).status_code == 200
    other = django_url("/rs:fit:50:50/plain/photos/alpha.png@png")
    for _ in range(2):
        assert client.get(other, RAW_URI=other).status_code == 200
    hits = runtime.get_thumbnailer().hits
    assert len(hits) == 2
    assert purge_source("photos/landscape.jpg").results == 1
    assert len(hits) == 1
    assert client.get(url, RAW_URI=url).status_code == 200


def test_a_settings_change_starts_with_nothing_remembered(
    media: Path, client: Any, settings: Any
) -> None:
    from django_oximg import runtime

    url = django_url(FIXED)
    for _ in range(2):
        assert client.get(url, RAW_URI=url).status_code == 200
    assert len(runtime.get_thumbnailer().hits) == 1
    settings.OXIMG = {**settings.OXIMG, "KEY": "00" * 32}  # the old URLs are no longer signed
    assert client.get(url, RAW_URI=url).status_code == 403
    assert len(runtime.get_thumbnailer().hits) == 0
