"""Whole requests fuzzed with hypothesis through :meth:`Thumbnailer.reply`.

test_signing.py enumerates the known signature tampering and test_options.py
fuzzes the options parser alone (any text parses or raises InvalidOptions).
Here the fuzzing goes through the whole request, with counting stores:

* a mutated signature (bit flips, truncation, padding, non-ASCII, duplicated
  segments, percent-encoding variants) is always 403, and neither the source
  store nor the result cache is touched;
* any path, signed or not, gets one of the statuses a thumbnail request may
  get, never an exception (which the server would turn into a 500).

The thumbnailer is shared by every example (hypothesis does not re-run
function-scoped fixtures per example): counters are compared before and after
each one. Results are clamped to 64 px so that a random valid request renders
in milliseconds.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from django_oximg.core.limits.executor import Executor
from django_oximg.core.options.signing import restored_path
from django_oximg.core.pipeline import RenderSettings
from django_oximg.core.serving.handler import Thumbnailer, ThumbnailerConfig
from django_oximg.core.serving.replies import Reply
from django_oximg.core.serving.staging import Limits
from django_oximg.core.stores.disk import FileSystemCacheStore
from django_oximg.core.stores.protocols import CachedResult, CacheEntry
from tests import images
from tests.constants import MIB, SIGNER
from tests.test_options import plausible_segments, segments
from tests.test_thumbnailer import CountingSourceStore

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

#: Statuses a GET for a thumbnail path may get (304 only with If-None-Match).
THUMBNAIL_STATUSES = {200, 304, 400, 403, 404, 415, 422}

#: The operational endpoints answer too, when a fuzzed path is exactly theirs.
ENDPOINTS = {"/health", "/metrics"}

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

VALID = "/rs:fit:50:50/plain/photos/a.jpg@jpeg"


class CountingCache:
    """A disk cache that counts every call, lookups included."""

    def __init__(self, root: Path) -> None:
        self.inner = FileSystemCacheStore(root)
        self.gets = 0
        self.puts = 0
        self._lock = threading.Lock()

    def get(self, key: str) -> CachedResult | None:
        with self._lock:
            self.gets += 1
        return self.inner.get(key)

    def put(self, key: str, data: bytes) -> None:
        with self._lock:
            self.puts += 1
        self.inner.put(key, data)

    def writable(self) -> bool:
        return self.inner.writable()

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def delete_prefix(self, prefix: str) -> int:
        return self.inner.delete_prefix(prefix)

    def iter_entries(self) -> Iterator[CacheEntry]:
        return self.inner.iter_entries()


@dataclass
class World:
    thumbnailer: Thumbnailer
    sources: CountingSourceStore
    cache: CountingCache

    def calls(self) -> tuple[int, int, int]:
        return self.sources.reads, self.cache.gets, self.cache.puts


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("fuzz")
    photos = root / "sources" / "photos"
    photos.mkdir(parents=True)
    (photos / "a.jpg").write_bytes(images.jpeg(160, 120))
    (photos / "b.png").write_bytes(images.png_with_alpha(120, 90))
    (photos / "c.gif").write_bytes(images.animated_gif(60, 45, frames=3))
    sources = CountingSourceStore(root / "sources")
    cache = CountingCache(root / "cache")
    executor = Executor(2, 8, 10.0, 256 * MIB)
    limits = Limits(render=RenderSettings(max_result_dimension=64))
    thumbnailer = Thumbnailer(
        ThumbnailerConfig(), SIGNER, {"": sources}, cache, executor, limits=limits
    )
    try:
        yield World(thumbnailer, sources, cache)
    finally:
        executor.shutdown(wait=True)


def answer(world: World, path: str, **headers: str) -> Reply:
    """``reply`` for ``path`` with any file closed (a hit hands out an open file)."""
    reply = world.thumbnailer.reply(path, "GET", headers)
    if reply.file is not None:
        reply.file.close()
    return reply


# -- mutated signatures ---------------------------------------------------------------


def percent_encode(text: str, which: list[bool], lower: bool) -> str:
    """``text`` with the characters marked in ``which`` written as %XX."""
    out = []
    for char, encode in zip(text, which + [False] * len(text), strict=False):
        if encode:
            hexed = quote(char, safe="") if char not in "-_.~" else f"%{ord(char):02X}"
            if hexed == char:
                hexed = f"%{ord(char):02X}"
            out.append(hexed.lower() if lower else hexed)
        else:
            out.append(char)
    return "".join(out)


@st.composite
def mutated_requests(draw: st.DrawFn) -> str:
    """The valid signed path of VALID, changed in one of the ways an attacker would try."""
    signature = SIGNER.sign(VALID)
    kind = draw(
        st.sampled_from(
            ["bit-flip", "truncate", "pad", "non-ascii", "duplicate", "percent", "path-percent"]
        )
    )
    if kind == "bit-flip":
        index = draw(st.integers(0, len(signature) - 1))
        bit = draw(st.integers(0, 6))
        char = chr(ord(signature[index]) ^ (1 << bit))
        return f"/{signature[:index]}{char}{signature[index + 1 :]}{VALID}"
    if kind == "truncate":
        return f"/{signature[: -draw(st.integers(1, len(signature)))]}{VALID}"
    if kind == "pad":
        padding = draw(st.text(alphabet="=%3Dd A_-.", min_size=1, max_size=4) | st.text(min_size=1))
        return f"/{signature}{padding}{VALID}"
    if kind == "non-ascii":
        char = draw(st.characters(min_codepoint=0x80))
        encoded = draw(st.sampled_from([char, quote(char, safe=""), quote(char, safe="").lower()]))
        index = draw(st.integers(0, len(signature)))
        return f"/{signature[:index]}{encoded}{signature[index:]}{VALID}"
    segments_of_path = VALID.split("/")[1:]
    if kind == "duplicate":
        parts = [signature, *segments_of_path]
        copied = draw(st.sampled_from(parts))
        where = draw(st.integers(0, len(parts)))
        parts.insert(where, copied)
        return "/" + "/".join(parts)
    if kind == "percent":
        which = draw(st.lists(st.booleans(), min_size=len(signature), max_size=len(signature)))
        assume(any(which))
        return f"/{percent_encode(signature, which, draw(st.booleans()))}{VALID}"
    # path-percent: the signature intact, the signed path spelled differently.
    rest = VALID[1:]
    which = draw(st.lists(st.booleans(), min_size=len(rest), max_size=len(rest)))
    assume(any(which))
    return f"/{signature}/{percent_encode(rest, which, draw(st.booleans()))}"


def test_the_unmutated_request_is_served(world: World) -> None:
    """Control: the request every mutation starts from is a 200."""
    assert answer(world, SIGNER.signed_path(VALID)).status == 200


@FUZZ
@given(mutated_requests())
def test_a_mutated_signature_is_403_and_touches_no_store(world: World, path: str) -> None:
    assume(path != SIGNER.signed_path(VALID))
    before = world.calls()
    reply = answer(world, path)
    assert (reply.status, reply.body) == (403, b"Forbidden\n")
    assert ("Cache-Control", "no-store") in reply.headers
    assert world.calls() == before


# -- any path -------------------------------------------------------------------------

TAILS = st.sampled_from(
    [
        "/plain/photos/a.jpg",
        "/plain/photos/a.jpg@webp",
        "/plain/photos/b.png@png",
        "/plain/photos/c.gif@gif",
        "/plain/photos/missing.jpg@jpeg",
        "/plain/photos/../a.jpg",
        "/cGhvdG9zL2EuanBn.jpg",
        "/plain/photos%2Fa.jpg@avif",
    ]
) | st.text(max_size=30).map(lambda text: "/plain/" + text)


def signed_as_verified(path: str) -> str:
    """``path`` behind the signature of the path the server verifies: as imgproxy does, it
    first repairs what proxies rewrite (``restored_path``: ``/plain/x:/y`` is ``x://y``),
    so a signature of the unrepaired text (from ``st.text``) would be a 403."""
    return f"/{SIGNER.sign(restored_path(path))}{path}"


signed_paths = st.builds(
    lambda options, tail: signed_as_verified(("/" + "/".join(options) if options else "") + tail),
    st.lists(plausible_segments | segments, max_size=6),
    TAILS,
)
#: Any code point, lone surrogates made common: no WSGI server passes them, but
#: ``reply`` is public API and a str may hold them.
any_text = st.text(
    alphabet=st.characters(blacklist_categories=()) | st.characters(categories=["Cs"]),
    max_size=80,
)


@FUZZ
@given(signed_paths)
@example("/" + SIGNER.sign("/plain/0://0") + "/plain/0:/0")  # once a 403: signed unrepaired
def test_any_signed_path_gets_a_thumbnail_status_never_an_exception(
    world: World, path: str
) -> None:
    reply = answer(world, path, HTTP_ACCEPT="image/avif,image/webp")
    assert reply.status in THUMBNAIL_STATUSES - {304, 403}, (path, reply.body)
    if reply.status != 200:
        assert ("Cache-Control", "no-store") in reply.headers


#: A well-formed signature (of another path) in front of any text: gets past the
#: form check, so the text reaches the HMAC.
well_formed_then_text = any_text.map(lambda text: f"/{SIGNER.sign(VALID)}/{text}")


@FUZZ
@given(st.one_of(any_text, any_text.map(lambda text: "/" + text), well_formed_then_text))
@example(f"/{SIGNER.sign(VALID)}/\ud800")  # once a UnicodeEncodeError in the HMAC
def test_any_text_as_a_path_gets_a_status_never_an_exception(world: World, path: str) -> None:
    """Unsigned text, lone surrogates and all: 403 nearly always, never a crash."""
    reply = answer(world, path)
    if path in ENDPOINTS:
        assert reply.status in (200, 404)
    else:
        assert reply.status in THUMBNAIL_STATUSES, (path, reply.body)
