"""Tests for the /info endpoint: django_oximg.core.serving.info, Thumbnailer.info_reply,
pipeline.summarise, and the Django side (view, get_info_url, purge).

The core tests build a thumbnailer over disk stores under ``tmp_path`` (no
Django), as tests/test_thumbnailer.py does. URLs are signed by an independent
imgproxy-style signer (plain hmac + base64) over the path *after* ``/info``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blurhash
import pytest
import pyvips
from django.test import Client

from django_oximg.core import errors, pipeline
from django_oximg.core.keys import source_directory
from django_oximg.core.serving import info
from django_oximg.core.serving.handler import Thumbnailer
from django_oximg.core.serving.replies import Reply
from django_oximg.core.stores.disk import FileSystemCacheStore
from django_oximg.purge import purge_source
from django_oximg.thumbnails import get_info_url
from tests import bombs, images
from tests.constants import JOIN_TIMEOUT, KEY, SALT
from tests.test_thumbnailer import CountingSourceStore

LANDSCAPE = "/plain/photos/landscape.jpg"

RED = (200, 30, 10)
BLUE = (20, 40, 220)


def independent_signature(path: str) -> str:
    """imgproxy's scheme: base64url, unpadded, of HMAC-SHA256(key, salt + path)."""
    digest = hmac.new(bytes.fromhex(KEY), bytes.fromhex(SALT) + path.encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def info_path(path: str) -> str:
    """``/info/<signature><path>``: the signature covers ``path`` only."""
    return f"/info/{independent_signature(path)}{path}"


def hex_colour(colour: tuple[int, int, int]) -> str:
    return "#" + "".join(f"{channel:02x}" for channel in colour)


def colour_is_near(found: str, colour: tuple[int, int, int], tolerance: int = 8) -> bool:
    """Whether "#rrggbb" is within ``tolerance`` of ``colour`` in every channel.

    A downscaled edge of a shape mixes a little of its neighbourhood into the
    opaque pixels the dominant colour averages.
    """
    channels = [int(found[i : i + 2], 16) for i in (1, 3, 5)]
    return all(abs(a - b) <= tolerance for a, b in zip(channels, colour, strict=True))


def solid(width: int, height: int, colour: tuple[int, int, int]) -> pyvips.Image:
    return pyvips.Image.black(width, height, bands=3).linear(1, list(colour)).cast("uchar")


def red_left_blue_right() -> bytes:
    """A quarter red (left), three quarters blue: blue dominates, red sits left."""
    return bytes(solid(40, 40, RED).join(solid(120, 40, BLUE), "horizontal").pngsave_buffer())


def red_disc_on_transparent_green() -> bytes:
    """Opaque red in a small disc; everything else fully transparent green."""
    size = 64
    xyz = pyvips.Image.xyz(size, size)
    distance = ((xyz[0] - size / 2) ** 2 + (xyz[1] - size / 2) ** 2) ** 0.5
    inside = distance < size / 5  # about an eighth of the area
    rgb = inside.ifthenelse(list(RED), [0, 255, 0]).cast("uchar")
    alpha = inside.ifthenelse(255, 0).cast("uchar")
    return bytes(rgb.bandjoin(alpha).copy(interpretation="srgb").pngsave_buffer())


def rotated_jpeg(orientation: int) -> bytes:
    """A 640x480 JPEG whose EXIF says ``orientation``."""
    image = pyvips.Image.new_from_buffer(images.jpeg(640, 480), "").copy()
    image.set_type(pyvips.GValue.gint_type, "orientation", orientation)
    return bytes(image.jpegsave_buffer())


# -- fixtures ---------------------------------------------------------------------------


@pytest.fixture
def source_dir(tmp_path: Path) -> Path:
    root = tmp_path / "sources"
    (root / "photos").mkdir(parents=True)
    (root / "photos" / "landscape.jpg").write_bytes(images.jpeg(640, 480))
    (root / "photos" / "alpha.png").write_bytes(red_disc_on_transparent_green())
    (root / "photos" / "anim.gif").write_bytes(images.animated_gif())
    (root / "photos" / "halves.png").write_bytes(red_left_blue_right())
    (root / "photos" / "rotated.jpg").write_bytes(rotated_jpeg(6))
    return root


@pytest.fixture
def sources(source_dir: Path) -> CountingSourceStore:
    """Counted, for conftest's ``make`` (and so ``thumbnailer``)."""
    return CountingSourceStore(source_dir)


def ask(thumbnailer: Thumbnailer, path: str, method: str = "GET", **headers: str) -> Reply:
    """The reply for the info request ``path`` (signed here), any file read and closed."""
    reply = thumbnailer.reply(info_path(path), method, headers)
    if reply.file is None:
        return reply
    with reply.file as handle:
        return Reply(reply.status, reply.headers, handle.read())


def header(reply: Reply, name: str) -> str | None:
    found = [value for key, value in reply.headers if key.lower() == name.lower()]
    assert len(found) <= 1, f"{name} sent {len(found)} times"
    return found[0] if found else None


def document(reply: Reply) -> dict[str, Any]:
    assert reply.status == 200, reply.body
    assert header(reply, "Content-Type") == "application/json"
    found = json.loads(reply.body)
    assert isinstance(found, dict)
    return found


def cached_files(cache_dir: Path) -> list[Path]:
    return sorted(p for p in cache_dir.rglob("*") if p.is_file()) if cache_dir.exists() else []


# -- parsing ----------------------------------------------------------------------------


def test_options_parse_by_long_and_short_names() -> None:
    short = info.parse_info_path("/bh:3:2/dc:0/cb:v7/exp:99/plain/photos/a.jpg")
    long = info.parse_info_path(
        "/blurhash:3:2/dominant_color:false/cachebuster:v7/expires:99/plain/photos/a.jpg"
    )
    assert short == long == info.InfoRequest("photos/a.jpg", (3, 2), False, "v7", 99)


def test_defaults_are_a_4x3_blurhash_and_the_dominant_colour() -> None:
    request = info.parse_info_path("/plain/photos/a.jpg")
    assert request == info.InfoRequest("photos/a.jpg", (4, 3), True)
    assert request.needs_pixels


def test_blurhash_0_0_and_dc_false_need_only_the_header() -> None:
    request = info.parse_info_path("/bh:0:0/dc:0/plain/photos/a.jpg")
    assert request.blurhash is None and not request.needs_pixels


def test_the_base64_source_form_decodes_as_for_thumbnails() -> None:
    encoded = base64.urlsafe_b64encode(b"photos/a b.jpg").rstrip(b"=").decode()
    assert info.parse_info_path(f"/{encoded[:5]}/{encoded[5:]}").source == "photos/a b.jpg"


@pytest.mark.parametrize(
    ("path", "public"),
    [
        ("/bh:10:1/plain/a.jpg", "Invalid blurhash"),
        ("/bh:0:3/plain/a.jpg", "Invalid blurhash"),
        ("/bh:4/plain/a.jpg", "Invalid blurhash"),
        ("/bh:a:b/plain/a.jpg", "Invalid blurhash"),
        ("/dc:maybe/plain/a.jpg", "Invalid dominant_color"),
        ("/exp:-5/plain/a.jpg", "Invalid expires"),
        ("/rs:fit:10:10/plain/a.jpg", "Unknown info option: rs"),
        ("/x%3Cy:1/plain/a.jpg", "Unknown info option: x?y"),
        ("/plain/a.jpg@webp", "Invalid source URL"),
        ("/", "Invalid source URL"),
    ],
)
def test_bad_info_paths_are_400_naming_the_problem(path: str, public: str) -> None:
    with pytest.raises(errors.InvalidOptions) as raised:
        info.parse_info_path(path)
    assert raised.value.public == public


def test_equal_requests_have_equal_canonical_forms() -> None:
    spelled_out = info.parse_info_path("/blurhash:4:3/dc:1/plain/photos/a.jpg")
    defaults = info.parse_info_path("/plain/photos/a.jpg")
    assert spelled_out.canonical() == defaults.canonical()
    busted = info.parse_info_path("/cb:2/plain/photos/a.jpg")
    assert busted.canonical() != defaults.canonical()


# -- the summary (pipeline) -------------------------------------------------------------


def test_dominant_colour_is_the_most_common_colour() -> None:
    summary = pipeline.summarise(red_left_blue_right(), None, True)
    assert summary == pipeline.Summary(None, hex_colour(BLUE))


def test_dominant_colour_ignores_transparent_pixels() -> None:
    summary = pipeline.summarise(red_disc_on_transparent_green(), None, True)
    assert summary.dominant_color is not None
    assert colour_is_near(summary.dominant_color, RED)


def test_blurhash_has_the_asked_components_and_keeps_the_layout() -> None:
    summary = pipeline.summarise(red_left_blue_right(), (4, 3), False)
    assert summary.dominant_color is None and summary.blurhash is not None
    assert len(summary.blurhash) == 4 + 2 * 4 * 3
    assert blurhash.components(summary.blurhash) == (4, 3)
    [row] = blurhash.decode(summary.blurhash, 8, 1)
    left, right = row[0], row[-1]
    assert left[0] > right[0] + 60  # red on the left
    assert right[2] > left[2] + 60  # blue on the right

    small = pipeline.summarise(red_left_blue_right(), (1, 1), False)
    assert small.blurhash is not None and blurhash.components(small.blurhash) == (1, 1)


def test_summary_of_a_truncated_source_is_invalid_image() -> None:
    with pytest.raises(errors.InvalidImage):
        pipeline.summarise(images.jpeg(640, 480)[:3000], (4, 3), True)


# -- the endpoint (core) ----------------------------------------------------------------


def test_info_of_a_jpeg_has_header_facts_blurhash_and_colour(
    thumbnailer: Thumbnailer, source_dir: Path
) -> None:
    reply = ask(thumbnailer, LANDSCAPE)
    found = document(reply)
    assert found["format"] == "jpeg"
    assert (found["width"], found["height"]) == (640, 480)
    assert found["size"] == (source_dir / "photos" / "landscape.jpg").stat().st_size
    assert (found["frames"], found["orientation"], found["has_alpha"]) == (1, 1, False)
    assert blurhash.components(found["blurhash"]) == (4, 3)
    assert re.fullmatch(r"#[0-9a-f]{6}", found["dominant_color"])
    assert header(reply, "Cache-Control") == "public, max-age=31536000, immutable"
    etag = header(reply, "ETag")
    assert etag is not None and re.fullmatch(r'"[0-9a-f]{40}"', etag)
    assert header(reply, "Content-Length") == str(len(reply.body))


def test_width_and_height_are_after_exif_orientation(thumbnailer: Thumbnailer) -> None:
    found = document(ask(thumbnailer, "/plain/photos/rotated.jpg"))
    assert (found["width"], found["height"], found["orientation"]) == (480, 640, 6)


def test_animation_frames_and_alpha_are_reported(thumbnailer: Thumbnailer) -> None:
    animation = document(ask(thumbnailer, "/plain/photos/anim.gif"))
    assert (animation["format"], animation["frames"]) == ("gif", 6)
    assert (animation["width"], animation["height"]) == (120, 90)
    alpha = document(ask(thumbnailer, "/plain/photos/alpha.png"))
    assert (alpha["format"], alpha["has_alpha"]) == ("png", True)
    assert colour_is_near(alpha["dominant_color"], RED)


def test_components_come_from_the_url(thumbnailer: Thumbnailer) -> None:
    found = document(ask(thumbnailer, "/bh:2:5/plain/photos/halves.png"))
    assert blurhash.components(found["blurhash"]) == (2, 5)
    assert found["dominant_color"] == hex_colour(BLUE)


def test_header_only_info_decodes_no_pixels(
    thumbnailer: Thumbnailer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_pixels(*args: Any, **kwargs: Any) -> pipeline.Summary:
        raise AssertionError("decoded pixels for a header-only request")

    monkeypatch.setattr(pipeline, "summarise", no_pixels)
    found = document(ask(thumbnailer, "/bh:0:0/dc:0" + LANDSCAPE))
    assert (found["width"], found["blurhash"], found["dominant_color"]) == (640, None, None)
    assert thumbnailer.executor.stats().completed == 0


def test_info_is_cached_under_the_sources_directory_and_served_from_it(
    thumbnailer: Thumbnailer, sources: CountingSourceStore, cache_dir: Path
) -> None:
    first = ask(thumbnailer, LANDSCAPE)
    [stored] = cached_files(cache_dir)
    assert stored.suffix == ".json"
    assert stored.parent.relative_to(cache_dir).as_posix() == source_directory(
        "photos/landscape.jpg"
    )
    assert stored.read_bytes() == first.body

    second = thumbnailer.reply(info_path(LANDSCAPE), "GET", {})
    assert second.file is None and second.body == first.body  # the cached file's, held in memory
    assert header(second, "Last-Modified") is not None  # the file's (a miss has none)
    assert header(second, "ETag") == header(first, "ETag")
    assert header(second, "Content-Type") == "application/json"
    assert sources.reads == 1

    FileSystemCacheStore(cache_dir).delete_prefix(source_directory("photos/landscape.jpg"))
    assert cached_files(cache_dir) == []


def test_equal_requests_share_one_cache_object(thumbnailer: Thumbnailer, cache_dir: Path) -> None:
    ask(thumbnailer, LANDSCAPE)
    ask(thumbnailer, "/blurhash:4:3/dc:true" + LANDSCAPE)
    assert len(cached_files(cache_dir)) == 1
    ask(thumbnailer, "/cb:v2" + LANDSCAPE)
    assert len(cached_files(cache_dir)) == 2


def test_if_none_match_gives_304_on_miss_and_hit(thumbnailer: Thumbnailer) -> None:
    etag = header(ask(thumbnailer, "/plain/photos/halves.png"), "ETag")
    assert etag is not None
    other = ask(thumbnailer, LANDSCAPE, HTTP_IF_NONE_MATCH=etag)
    assert other.status == 200  # another request's ETag does not match
    hit = ask(thumbnailer, "/plain/photos/halves.png", HTTP_IF_NONE_MATCH=etag)
    assert (hit.status, hit.body) == (304, b"")

    fresh_etag = thumbnailer.job_for(info_path("/dc:0/plain/photos/anim.gif"), "").etag
    miss = ask(thumbnailer, "/dc:0/plain/photos/anim.gif", HTTP_IF_NONE_MATCH=fresh_etag)
    assert (miss.status, miss.body) == (304, b"")


def test_head_has_headers_and_no_body(thumbnailer: Thumbnailer) -> None:
    reply = ask(thumbnailer, LANDSCAPE, method="HEAD")
    assert reply.status == 200 and reply.body == b""
    assert header(reply, "Content-Type") == "application/json"


def test_other_methods_are_405(thumbnailer: Thumbnailer) -> None:
    assert ask(thumbnailer, LANDSCAPE, method="POST").status == 405


def test_concurrent_identical_requests_read_the_source_once(
    thumbnailer: Thumbnailer, sources: CountingSourceStore
) -> None:
    bodies: list[bytes] = []
    lock = threading.Lock()

    def one() -> None:
        body = ask(thumbnailer, LANDSCAPE).body
        with lock:
            bodies.append(body)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT)
    assert len(bodies) == 8 and len(set(bodies)) == 1
    assert sources.reads == 1


# -- signatures and errors --------------------------------------------------------------


def test_the_signature_covers_the_path_after_info_only(thumbnailer: Thumbnailer) -> None:
    with_prefix_signed = f"/info/{independent_signature('/info' + LANDSCAPE)}{LANDSCAPE}"
    assert thumbnailer.reply(with_prefix_signed, "GET", {}).status == 403


def test_a_thumbnail_signature_does_not_open_info_of_another_path(
    thumbnailer: Thumbnailer, sources: CountingSourceStore
) -> None:
    signature = independent_signature(LANDSCAPE)
    tampered = f"/info/{signature}/bh:9:9{LANDSCAPE}"
    reply = thumbnailer.reply(tampered, "GET", {})
    assert reply.status == 403
    assert header(reply, "Cache-Control") == "no-store"
    assert sources.reads == 0


def test_missing_signature_is_403(thumbnailer: Thumbnailer) -> None:
    assert thumbnailer.reply("/info/", "GET", {}).status == 403


def test_unsigned_info_only_when_allowed(make: Callable[..., Thumbnailer]) -> None:
    assert make().reply("/info/unsafe" + LANDSCAPE, "GET", {}).status == 403
    assert make(allow_unsigned=True).reply("/info/unsafe" + LANDSCAPE, "GET", {}).status == 200


def test_a_missing_source_is_404_and_nothing_is_cached(
    thumbnailer: Thumbnailer, cache_dir: Path
) -> None:
    reply = ask(thumbnailer, "/plain/photos/nope.jpg")
    assert reply.status == 404
    assert header(reply, "Cache-Control") == "no-store"
    assert cached_files(cache_dir) == []


def test_a_blocked_format_is_415_and_garbage_is_422(
    thumbnailer: Thumbnailer, source_dir: Path
) -> None:
    (source_dir / "photos" / "drawing.svg").write_bytes(
        b'<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"/>'
    )
    (source_dir / "photos" / "noise.jpg").write_bytes(bombs.random_bytes())
    assert ask(thumbnailer, "/plain/photos/drawing.svg").status == 415
    assert ask(thumbnailer, "/plain/photos/noise.jpg").status == 422


def test_a_bad_option_is_400_naming_it(thumbnailer: Thumbnailer) -> None:
    reply = ask(thumbnailer, "/rs:fit:1:1" + LANDSCAPE)
    assert reply.status == 400
    assert reply.body == b"Unknown info option: rs\n"


def test_an_expired_url_is_404(make: Callable[..., Thumbnailer]) -> None:
    thumbnailer = make(clock=lambda: 2000.0)
    assert ask(thumbnailer, "/exp:1000" + LANDSCAPE).status == 404
    assert ask(thumbnailer, "/exp:3000" + LANDSCAPE).status == 200


def test_pixel_work_obeys_the_resolution_limit_but_the_header_does_not(
    make: Callable[..., Thumbnailer], source_dir: Path, cache_dir: Path
) -> None:
    (source_dir / "photos" / "bomb.png").write_bytes(bombs.png_claiming(65535, 65535))
    thumbnailer = make()
    refused = ask(thumbnailer, "/plain/photos/bomb.png")
    assert refused.status == 422
    assert cached_files(cache_dir) == []
    header_only = document(ask(thumbnailer, "/bh:0:0/dc:0/plain/photos/bomb.png"))
    assert (header_only["width"], header_only["height"]) == (65535, 65535)


# -- Django: the view, get_info_url and purge -------------------------------------------


def fetch_json(client: Client, url: str) -> tuple[int, dict[str, Any]]:
    response = client.get(url, RAW_URI=url)
    try:
        body = response.getvalue()
    finally:
        response.close()
    return response.status_code, json.loads(body) if response.status_code == 200 else {}


def test_the_view_answers_info_under_the_mount_point(media: Path) -> None:
    url = "/img" + info_path(LANDSCAPE)
    status, found = fetch_json(Client(), url)
    assert status == 200
    assert (found["width"], found["height"], found["format"]) == (640, 480, "jpeg")


def test_get_info_url_is_signed_versioned_and_served(media: Path) -> None:
    url = get_info_url("photos/alpha.png")
    assert url.startswith("/img/info/")
    assert "/cb:" in url  # the source's version: a replaced source gets a new URL
    status, found = fetch_json(Client(), url)
    assert status == 200
    assert (found["width"], found["height"], found["has_alpha"]) == (320, 240, True)


def test_get_info_url_refuses_a_source_the_server_would_refuse(media: Path, settings: Any) -> None:
    """Its BlurHash decodes pixels, which the server refuses over the resolution limit."""
    url = get_info_url("photos/landscape.jpg")
    settings.OXIMG = {**settings.OXIMG, "MAX_SRC_RESOLUTION": 640 * 480 - 1}
    with pytest.raises(errors.SourceTooLarge, match="640x480x1 px exceeds 307199"):
        get_info_url("photos/landscape.jpg")
    assert fetch_json(Client(), url)[0] == 422


def test_get_info_url_signature_does_not_fetch_the_image(media: Path) -> None:
    """``/info`` is outside the signed part: without ``bh`` the same path is a full-size render."""
    url = get_info_url("photos/landscape.jpg")
    as_thumbnail = url.replace("/img/info/", "/img/", 1)
    response = Client().get(as_thumbnail, RAW_URI=as_thumbnail)
    assert response.status_code == 400
    assert response.content == b"Unknown option: bh\n"


def test_get_info_url_base64_encodes_unusual_names(media: Path) -> None:
    (media / "photos" / "a b+c.jpg").write_bytes(images.jpeg(64, 48))
    url = get_info_url("photos/a b+c.jpg")
    assert "/plain/" not in url
    status, found = fetch_json(Client(), url)
    assert (status, found["width"]) == (200, 64)


def test_purging_a_source_removes_its_info(media: Path) -> None:
    status, _ = fetch_json(Client(), get_info_url("photos/landscape.jpg"))
    assert status == 200
    stored = list((media / "oximg").rglob("*.json"))
    assert len(stored) == 1
    assert purge_source("photos/landscape.jpg").results == 1
    assert not stored[0].exists()
