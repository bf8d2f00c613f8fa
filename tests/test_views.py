"""Tests for django_oximg.views: the thumbnailer behind a URLconf (tests/urls.py: /img/).

Requests go through Django's test client. Most pass ``RAW_URI`` as gunicorn
does, so a signature over a percent-encoded path verifies as it would in
production; the result cache is ``MEDIA_ROOT/oximg`` (the ``media`` fixture).
"""

from __future__ import annotations

import base64
import errno
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pyvips
from django.test import Client
from django.urls import resolve

from django_oximg import runtime
from django_oximg.core import pipeline
from django_oximg.thumbnails import get_thumbnail
from tests import images

CONTROL = "/rs:fit:200:200/plain/photos/landscape.jpg@jpeg"
AUTO = "/rs:fit:200:200/plain/photos/landscape.jpg"


@dataclass
class Fetched:
    status: int
    headers: dict[str, str]
    body: bytes
    #: Whether Django sent a FileResponse (a cache hit on disk).
    streamed: bool


def signed(path: str) -> str:
    """The URL for ``path`` under the URLconf's mount point."""
    return "/img" + runtime.get_signer().signed_path(path)


def fetch(client: Client, url: str, method: str = "get", raw: bool = True, **extra: Any) -> Fetched:
    """Request ``url`` and return its answer, closing the response.

    With ``raw``, the URL is also given as RAW_URI (what gunicorn passes).
    """
    if raw:
        extra["RAW_URI"] = url
    response = getattr(client, method)(url, **extra)
    try:
        body = b"".join(response.streaming_content) if response.streaming else response.content
    finally:
        response.close()
    return Fetched(
        response.status_code,
        {name.lower(): value for name, value in response.headers.items()},
        body,
        response.streaming,
    )


def cached_files(media: Path) -> list[Path]:
    root = media / "oximg"
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def decode(data: bytes) -> pyvips.Image:
    return pyvips.Image.new_from_buffer(data, "")


@pytest.fixture
def client() -> Client:
    return Client()


# -- success ---------------------------------------------------------------------------


def test_a_tag_url_is_served_at_the_size_the_tag_promised(
    media: Path, client: Client, no_fd_leak: None
) -> None:
    thumbnail = get_thumbnail("photos/landscape.jpg", "200x100", crop="center")
    answer = fetch(client, thumbnail.url)
    assert answer.status == 200
    image = decode(answer.body)
    assert (image.width, image.height) == (thumbnail.width, thumbnail.height) == (200, 100)


def test_a_miss_is_rendered_and_cached_and_a_hit_is_the_file_with_the_same_etag(
    media: Path, client: Client, no_fd_leak: None
) -> None:
    miss = fetch(client, signed(CONTROL))
    assert miss.status == 200
    assert not miss.streamed
    assert miss.headers["content-type"] == "image/jpeg"
    assert miss.headers["content-length"] == str(len(miss.body))
    assert miss.headers["cache-control"] == "public, max-age=31536000, immutable"
    etag = miss.headers["etag"]
    assert etag.startswith('"') and not etag.startswith("W/")
    assert "vary" not in miss.headers
    assert "last-modified" not in miss.headers
    [stored] = cached_files(media)
    assert stored.read_bytes() == miss.body

    hit = fetch(client, signed(CONTROL))
    assert hit.status == 200
    assert "last-modified" in hit.headers  # the cached file's (a miss has none)
    assert hit.body == miss.body
    assert hit.headers["etag"] == etag
    assert hit.headers["content-length"] == str(len(miss.body))
    assert hit.headers["content-type"] == "image/jpeg"
    assert cached_files(media) == [stored]


def test_if_none_match_gives_304_on_a_miss_and_on_a_hit(media: Path, client: Client) -> None:
    first = fetch(client, signed(CONTROL))
    etag = first.headers["etag"]
    (cached,) = cached_files(media)
    cached.unlink()  # the next request is a miss again
    on_miss = fetch(client, signed(CONTROL), HTTP_IF_NONE_MATCH=etag)
    assert on_miss.status == 304
    assert on_miss.body == b""
    assert on_miss.headers["etag"] == etag
    on_hit = fetch(client, signed(CONTROL), HTTP_IF_NONE_MATCH=etag)
    assert on_hit.status == 304
    assert on_hit.body == b""
    assert on_hit.headers["etag"] == etag


def test_head_gets_headers_and_no_body_on_miss_and_hit(media: Path, client: Client) -> None:
    head_miss = fetch(client, signed(CONTROL), method="head")
    get = fetch(client, signed(CONTROL))
    head_hit = fetch(client, signed(CONTROL), method="head")
    for head in (head_miss, head_hit):
        assert head.status == 200
        assert head.body == b""
        assert head.headers["content-length"] == str(len(get.body))
        assert head.headers["etag"] == get.headers["etag"]


def test_a_range_on_a_hit_gives_206(media: Path, client: Client, no_fd_leak: None) -> None:
    full = fetch(client, signed(CONTROL)).body
    partial = fetch(client, signed(CONTROL), HTTP_RANGE="bytes=100-199")
    assert partial.status == 206
    assert partial.headers["content-range"] == f"bytes 100-199/{len(full)}"
    assert partial.body == full[100:200]


def test_cache_control_follows_the_setting(media: Path, client: Client, settings: Any) -> None:
    settings.OXIMG = {**settings.OXIMG, "CACHE_CONTROL": "public, max-age=600"}
    miss = fetch(client, signed(CONTROL))
    hit = fetch(client, signed(CONTROL))
    assert miss.headers["cache-control"] == hit.headers["cache-control"] == "public, max-age=600"
    error = fetch(client, signed("/rs:fit:200:200/plain/photos/missing.jpg@jpeg"))
    assert error.headers["cache-control"] == "no-store"


# -- negotiation -----------------------------------------------------------------------


def test_accept_chooses_the_format_and_each_is_its_own_cache_object(
    media: Path, client: Client
) -> None:
    """Bad input 49: no wrong-format hit, Vary: Accept on every negotiated answer."""
    if not pipeline.saver_available("avif"):
        pytest.skip("this libvips has no AVIF saver (heifsave)")
    avif = fetch(client, signed(AUTO), HTTP_ACCEPT="image/avif,image/webp,*/*")
    webp = fetch(client, signed(AUTO), HTTP_ACCEPT="image/webp,*/*")
    anything = fetch(client, signed(AUTO), HTTP_ACCEPT="*/*")
    assert avif.body[4:12] == b"ftypavif"
    assert avif.headers["content-type"] == "image/avif"
    assert webp.body[:4] == b"RIFF" and webp.body[8:12] == b"WEBP"
    assert webp.headers["content-type"] == "image/webp"
    assert anything.body[:3] == b"\xff\xd8\xff"
    assert anything.headers["content-type"] == "image/jpeg"
    for answer in (avif, webp, anything):
        assert answer.headers["vary"] == "Accept"
    assert len({avif.headers["etag"], webp.headers["etag"], anything.headers["etag"]}) == 3
    assert len(cached_files(media)) == 3
    # Hits keep their format and Vary.
    again = fetch(client, signed(AUTO), HTTP_ACCEPT="*/*")
    assert "last-modified" in again.headers and again.body == anything.body
    assert again.headers["vary"] == "Accept"
    assert fetch(client, signed(AUTO), HTTP_ACCEPT="image/webp").body == webp.body


def test_a_png_source_falls_back_to_png(media: Path, client: Client) -> None:
    answer = fetch(client, signed("/rs:fit:100:100/plain/photos/alpha.png"), HTTP_ACCEPT="*/*")
    assert answer.body[:8] == b"\x89PNG\r\n\x1a\n"
    assert decode(answer.body).hasalpha()


def test_an_explicit_format_ignores_accept_and_sends_no_vary(media: Path, client: Client) -> None:
    answer = fetch(client, signed(CONTROL), HTTP_ACCEPT="image/avif,image/webp")
    assert answer.headers["content-type"] == "image/jpeg"
    assert "vary" not in answer.headers


# -- errors ----------------------------------------------------------------------------


def bad_sources(media: Path) -> None:
    """Broken and hostile files next to the good ones."""
    jpeg = images.jpeg(640, 480)
    photos = media / "photos"
    (photos / "svg.jpg").write_bytes(
        b'<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><rect/></svg>'
    )
    (photos / "ppm.jpg").write_bytes(b"P6\n2 2\n255\n" + bytes(12))
    (photos / "random.jpg").write_bytes(bytes((i * 131 + 7) % 256 for i in range(1024)))
    (photos / "empty.jpg").write_bytes(b"")
    (photos / "truncated.jpg").write_bytes(jpeg[: len(jpeg) // 2])
    secret = media.parent / "media-secret"
    secret.mkdir()
    (secret / "secret.jpg").write_bytes(images.jpeg(64, 48))
    (photos / "escape.jpg").symlink_to(secret / "secret.jpg")


def fit(source: str) -> str:
    return f"/rs:fit:100:100/plain/{source}@jpeg"


def flipped(url_path: str) -> str:
    signature = runtime.get_signer().sign(url_path)
    replacement = "B" if signature[0] == "A" else "A"
    return f"/img/{replacement}{signature[1:]}{url_path}"


ERROR_CASES: list[tuple[str, Callable[[], str], int]] = [
    (
        "bad option",
        lambda: signed("/rs:fit:100:100/contrast:2/plain/photos/landscape.jpg@jpeg"),
        400,
    ),
    ("bad value", lambda: signed("/w:wide/plain/photos/landscape.jpg@jpeg"), 400),
    ("missing signature", lambda: "/img" + CONTROL, 403),
    ("flipped signature", lambda: flipped(CONTROL), 403),
    ("bad signature, missing source", lambda: flipped(fit("photos/nope.jpg")), 403),
    ("truncated signature", lambda: signed(CONTROL)[: -len(CONTROL) - 1] + CONTROL, 403),
    ("missing source", lambda: signed(fit("photos/nope.jpg")), 404),
    ("dot-dot", lambda: signed(fit("../../etc/passwd")), 404),
    ("encoded dot-dot", lambda: signed(fit("%2e%2e/%2e%2e/etc/passwd")), 404),
    ("double-encoded dot-dot", lambda: signed(fit("%252e%252e/%252e%252e/etc/passwd")), 404),
    ("sibling prefix", lambda: signed(fit("../media-secret/secret.jpg")), 404),
    ("symlink out", lambda: signed(fit("photos/escape.jpg")), 404),
    ("absolute", lambda: signed(fit("/etc/passwd")), 404),
    ("encoded absolute", lambda: signed(fit("%2Fetc%2Fpasswd")), 404),
    ("backslashes", lambda: signed(fit("..%5C..%5Cetc%5Cpasswd")), 404),
    ("NUL", lambda: signed(fit("photos/landscape.jpg%00.png")), 400),
    ("expired", lambda: signed("/exp:1/rs:fit:100:100/plain/photos/landscape.jpg@jpeg"), 404),
    ("svg named jpg", lambda: signed(fit("photos/svg.jpg")), 415),
    ("ppm named jpg", lambda: signed(fit("photos/ppm.jpg")), 415),
    ("random bytes", lambda: signed(fit("photos/random.jpg")), 422),
    ("empty file", lambda: signed(fit("photos/empty.jpg")), 422),
    ("truncated jpeg", lambda: signed(fit("photos/truncated.jpg")), 422),
]


@pytest.mark.parametrize(
    ("why", "make_url", "status"), ERROR_CASES, ids=[case[0] for case in ERROR_CASES]
)
def test_errors_are_short_plain_text_never_stored_and_never_500(
    media: Path, client: Client, why: str, make_url: Callable[[], str], status: int
) -> None:
    bad_sources(media)
    answer = fetch(client, make_url())
    assert answer.status == status, (why, answer.body)
    assert answer.headers["cache-control"] == "no-store"
    assert answer.headers["content-type"] == "text/plain; charset=utf-8"
    assert 0 < len(answer.body) < 100
    assert b"/" not in answer.body  # no path leaks
    assert cached_files(media) == []


# -- the fallback image ------------------------------------------------------------------

#: Errors of a source that fails once it is read: answered with the fallback
#: image. The others are refused before the source is read, and keep their error.
SOURCE_FAILURES = {
    "missing source",
    "double-encoded dot-dot",  # a file named "%2e%2e/...", inside the root and missing
    "symlink out",
    "svg named jpg",
    "ppm named jpg",
    "random bytes",
    "empty file",
    "truncated jpeg",
}


@pytest.fixture
def fallback(media: Path, settings: Any) -> bytes:
    """A fallback image outside the media root, set as ``FALLBACK_IMAGE_PATH``."""
    data = images.png_with_alpha(32, 24)
    path = media.parent / "fallback.png"
    path.write_bytes(data)
    settings.OXIMG = {**settings.OXIMG, "FALLBACK_IMAGE_PATH": path}
    return data


def answered_with_fallback(answer: Fetched, data: bytes, status: int = 200) -> bool:
    return (
        answer.status == status
        and answer.headers["content-type"] == "image/png"
        and answer.headers["fallback-image"] == "1"
        and answer.body == data
    )


@pytest.mark.parametrize(
    ("why", "make_url", "status"), ERROR_CASES, ids=[case[0] for case in ERROR_CASES]
)
def test_a_source_that_fails_is_answered_with_the_fallback_image_never_cached(
    media: Path,
    client: Client,
    fallback: bytes,
    why: str,
    make_url: Callable[[], str],
    status: int,
) -> None:
    bad_sources(media)
    answer = fetch(client, make_url())
    if why in SOURCE_FAILURES:
        assert answered_with_fallback(answer, fallback), (why, answer.status, answer.body[:80])
        assert answer.headers["cache-control"] == "max-age=60"
    else:
        assert answer.status == status, why
        assert answer.headers["cache-control"] == "no-store"
        assert "fallback-image" not in answer.headers
    assert cached_files(media) == []


def test_a_source_over_the_resolution_limit_gets_the_fallback_image(
    media: Path, client: Client, fallback: bytes
) -> None:
    from tests import bombs

    (media / "photos" / "phone.png").write_bytes(bombs.flat_grey_png(8160, 6144))
    answer = fetch(client, signed(fit("photos/phone.png")))
    assert answered_with_fallback(answer, fallback)
    assert cached_files(media) == []


def test_a_source_put_right_is_rendered_at_once(
    media: Path, client: Client, fallback: bytes
) -> None:
    """The fallback is kept nowhere on the server: the next request reads the source again."""
    url = signed(fit("photos/later.jpg"))
    assert answered_with_fallback(fetch(client, url), fallback)
    (media / "photos" / "later.jpg").write_bytes(images.jpeg(640, 480))
    answer = fetch(client, url)
    assert answer.status == 200
    assert "fallback-image" not in answer.headers
    assert decode(answer.body).width == 100


@pytest.mark.parametrize(
    ("code", "ttl", "cache_control"),
    [(200, 5, "max-age=5"), (200, 0, "no-store"), (404, 60, "no-store"), (503, 5, "no-store")],
)
def test_the_fallback_has_the_configured_status_and_lifetime(
    media: Path, client: Client, settings: Any, code: int, ttl: int, cache_control: str
) -> None:
    data = images.png_with_alpha(8, 8)
    settings.OXIMG = {
        **settings.OXIMG,
        "FALLBACK_IMAGE_DATA": base64.b64encode(data).decode(),
        "FALLBACK_IMAGE_HTTP_CODE": code,
        "FALLBACK_IMAGE_TTL": ttl,
    }
    url = signed(fit("photos/nope.jpg"))
    answer = fetch(client, url)
    assert answered_with_fallback(answer, data, code)
    assert answer.headers["cache-control"] == cache_control
    head = fetch(client, url, method="head")
    assert head.status == code
    assert head.body == b""
    assert head.headers["content-length"] == str(len(data))


def test_an_info_url_keeps_its_error(media: Path, client: Client, fallback: bytes) -> None:
    answer = fetch(client, "/img/info" + runtime.get_signer().signed_path("/plain/photos/no.jpg"))
    assert answer.status == 404
    assert "fallback-image" not in answer.headers


def test_a_bad_option_is_named_in_the_body(media: Path, client: Client) -> None:
    answer = fetch(client, signed("/rs:fit:100:100/contrast:2/plain/photos/landscape.jpg@jpeg"))
    assert b"contrast" in answer.body
    answer = fetch(client, signed("/q:500/plain/photos/landscape.jpg@jpeg"))
    assert b"quality" in answer.body


def test_a_future_expiry_is_served(media: Path, client: Client) -> None:
    url = signed("/exp:4102444800/rs:fit:100:100/plain/photos/landscape.jpg@jpeg")
    assert fetch(client, url).status == 200


def test_post_gets_405_and_nothing_is_rendered(media: Path, client: Client) -> None:
    answer = fetch(client, signed(CONTROL), method="post")
    assert answer.status == 405
    assert answer.headers["allow"] == "GET, HEAD"
    assert answer.headers["cache-control"] == "no-store"
    assert cached_files(media) == []


def test_a_decoded_path_without_raw_uri_fails_closed(media: Path, client: Client) -> None:
    """runserver gives no raw URI: a signed ``%2e%2e`` path is then a 403, not a read."""
    answer = fetch(client, signed(fit("%2e%2e/%2e%2e/etc/passwd")), raw=False)
    assert answer.status == 403
    assert fetch(client, signed(CONTROL), raw=False).status == 200


# -- encoding variants (bad input 7) ----------------------------------------------------

VARIANTS = [
    "/rs:fit:200:200/plain/photos/landscape.jpg@jpeg",
    "/rs:fit:200:200/plain/photos%2Flandscape.jpg@jpeg",
    "/rs:fit:200:200/plain/photos%2flandscape.jpg@jpeg",
    "/rs:fit:200:200/plain/photos//landscape.jpg@jpeg",
    "/rs:fit:200:200//plain/photos/landscape.jpg@jpeg",
    "/rs:fit:200:200/plain/photos/landscape.jpg@jpeg/",
    "/h:200/w:200/plain/photos/landscape.jpg@jpeg",
    "/w:200/h:200/plain/photos/landscape.jpg@jpg",
]


@pytest.mark.parametrize("raw", [True, False], ids=["raw-uri", "rebuilt"])
def test_encoding_variants_give_403_or_200_with_one_cache_object(
    media: Path, client: Client, raw: bool
) -> None:
    signature = runtime.get_signer().sign(VARIANTS[0])
    statuses = {}
    for path in VARIANTS:
        statuses[path] = fetch(client, signed(path), raw=raw).status
        resigned = fetch(client, f"/img/{signature}{path}", raw=raw).status
        assert resigned in (200, 403), path
        assert resigned == 200 or path != VARIANTS[0]
    assert statuses[VARIANTS[0]] == 200
    assert set(statuses.values()) <= {200, 400, 403, 404}, statuses
    assert len(cached_files(media)) == 1


# -- cache faults (bad input 48) --------------------------------------------------------


def test_a_read_only_cache_still_answers_200_from_memory(
    media: Path, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def read_only(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    first = fetch(client, signed(CONTROL))
    second = fetch(client, signed(CONTROL))
    assert first.status == second.status == 200
    assert first.body == second.body
    assert not second.streamed
    assert decode(first.body).width == 200
    assert cached_files(media) == []


def test_a_cache_directory_that_cannot_be_made_still_answers_200(
    media: Path, client: Client
) -> None:
    (media / "oximg").write_bytes(b"")  # a file where the cache directory should be
    answer = fetch(client, signed(CONTROL))
    assert answer.status == 200
    assert decode(answer.body).width == 200
    assert (media / "oximg").read_bytes() == b""


def test_health_names_a_result_cache_whose_writes_fail(media: Path, client: Client) -> None:
    """Even for root, whom no permission bit stops: the cache's path runs through a file."""
    (media / "oximg").write_bytes(b"")
    assert fetch(client, signed(CONTROL)).status == 200  # rendered, not stored
    health = fetch(client, "/img/health")
    assert health.status == 503
    assert b"result cache not writable" in health.body
    assert b"result_cache_write failing for " in health.body
    assert b"Not a directory" in health.body


# -- one image, one URL -------------------------------------------------------------------


def test_a_query_string_is_not_found(media: Path, client: Client) -> None:
    url = signed(CONTROL)
    answer = fetch(client, url + "?utm_source=mail", raw=False, RAW_URI=url + "?utm_source=mail")
    assert answer.status == 404
    assert answer.headers["cache-control"] == "no-store"
    assert cached_files(media) == []
    assert fetch(client, url).status == 200


def test_a_percent_encoded_mount_point_is_not_found(media: Path, client: Client) -> None:
    url = signed(CONTROL)
    encoded = "/im%67" + url.removeprefix("/img")
    answer = fetch(client, url, raw=False, RAW_URI=encoded)
    assert answer.status == 404
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert cached_files(media) == []


@pytest.mark.parametrize("urlconf", ["django_oximg.urls", "django_oximg.urls_async"])
@pytest.mark.parametrize("rest", ["", "x\ny", "x\n", "\n", "x\ry", "x\x00y"])
def test_both_urlconfs_give_every_path_to_the_view(urlconf: str, rest: str) -> None:
    """Whatever follows the mount point is the thumbnailer's to answer, never Django's 404."""
    match = resolve("/" + rest, urlconf=urlconf)
    assert match.url_name == "serve"
    assert match.kwargs == {"path": rest}


def test_every_answer_says_nosniff(media: Path, client: Client) -> None:
    ok = fetch(client, signed(CONTROL))
    hit = fetch(client, signed(CONTROL))
    bad = fetch(client, signed("/q:500/plain/photos/landscape.jpg@jpeg"))
    for answer in (ok, hit, bad):
        assert answer.headers["x-content-type-options"] == "nosniff"


# -- a site's own option (OXIMG["EXTENSIONS"]) ------------------------------------------

GREY = "photos/grey.png"


@pytest.fixture
def sepia_site(media: Path, settings: Any) -> Path:
    """The tests' sepia extension configured, and a flat grey source (128, 128, 128)."""
    settings.OXIMG = {**settings.OXIMG, "EXTENSIONS": ["tests.site_extensions.SEPIA"]}
    grey = (pyvips.Image.black(64, 48, bands=3) + 128).cast("uchar")
    (media / GREY).write_bytes(bytes(grey.copy(interpretation="srgb").pngsave_buffer()))
    return media


def test_a_sites_option_from_the_tag_is_served_with_its_pixels(
    sepia_site: Path, client: Client, no_fd_leak: None
) -> None:
    toned = get_thumbnail(GREY, "32x24", sepia=0.8)
    assert "/sep:0.8/" in toned.url
    answer = fetch(client, toned.url)
    assert answer.status == 200
    image = decode(answer.body)
    assert (image.width, image.height) == (toned.width, toned.height) == (32, 24)
    red, green, blue = image(16, 12)
    assert red > green > blue
    plain = decode(fetch(client, get_thumbnail(GREY, "32x24").url).body)
    assert plain(16, 12) == [128.0, 128.0, 128.0]


def test_a_bad_argument_of_a_sites_option_is_a_400_naming_it(
    sepia_site: Path, client: Client
) -> None:
    answer = fetch(client, signed(f"/w:32/sep:2/plain/{GREY}@png"))
    assert answer.status == 400
    assert answer.body.strip() == b"Invalid sepia: 2"
    assert answer.headers["cache-control"] == "no-store"
    assert cached_files(sepia_site) == []


def test_a_sites_option_is_in_the_cache_key_and_its_spellings_share_one(
    sepia_site: Path, client: Client
) -> None:
    spellings = [f"/w:32/sep:0.8/plain/{GREY}@png", f"/sepia:0.80/w:32/plain/{GREY}@png"]
    toned = [fetch(client, signed(path)) for path in spellings]
    plain = fetch(client, signed(f"/w:32/sep:0/plain/{GREY}@png"))
    assert [answer.status for answer in (*toned, plain)] == [200, 200, 200]
    assert toned[0].headers["etag"] == toned[1].headers["etag"] != plain.headers["etag"]
    assert plain.headers["etag"] == fetch(client, signed(f"/w:32/plain/{GREY}@png")).headers["etag"]
    assert len(cached_files(sepia_site)) == 2
