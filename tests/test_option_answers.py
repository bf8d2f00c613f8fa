"""imgproxy's newer options answered through the view, the WSGI middleware and the tags.

Each shell gets the same answer: headers (``Content-Disposition``, ``Vary``),
bytes (the source itself for ``raw`` and ``skip_processing``), refusals
(the per-URL limits, the site's URL rules), and the size the tag printed.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import pyvips
from django.core.exceptions import ImproperlyConfigured

from django_oximg import runtime
from django_oximg.core import pipeline
from django_oximg.core.options import Options, parse_path
from django_oximg.thumbnails import ThumbnailError, get_thumbnail
from tests import images
from tests.shells import SHELLS, Answer, through_view

LANDSCAPE = "photos/landscape.jpg"


@pytest.fixture(params=sorted(SHELLS))
def send(request: pytest.FixtureRequest, media: Path) -> Callable[..., Answer]:
    return SHELLS[request.param]


def url(path: str) -> str:
    return "/img" + runtime.get_signer().signed_path(path)


def parse_options(path: str) -> Options:
    return parse_path(path).options


def size_of(body: bytes) -> tuple[int, int]:
    image = pyvips.Image.new_from_buffer(body, "")
    return image.width, image.height


# -- filename and return_attachment ---------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ("fn:holiday", 'inline; filename="holiday.png"'),
        ("att:1", 'attachment; filename="landscape.png"'),
        ("fn:holiday/att:1", 'attachment; filename="holiday.png"'),
    ],
)
def test_content_disposition_on_a_miss_and_on_a_hit(
    send: Callable[..., Answer], options: str, expected: str
) -> None:
    for _ in range(2):  # rendered, then a file from the result cache
        status, headers, _body = send(url(f"/{options}/w:50/plain/{LANDSCAPE}@png"))
        assert status == 200
        assert headers["content-disposition"] == expected


def test_no_content_disposition_unless_asked(send: Callable[..., Answer]) -> None:
    assert "content-disposition" not in send(url(f"/w:50/plain/{LANDSCAPE}@png"))[1]


def test_a_filename_cannot_inject_a_header(send: Callable[..., Answer]) -> None:
    name = 'a"\r\nSet-Cookie: stolen=1\r\n\r\n<script>'
    encoded = base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")
    status, headers, _ = send(url(f"/fn:{encoded}:1/w:50/plain/{LANDSCAPE}@png"))
    assert status == 200
    assert "set-cookie" not in headers
    value = headers["content-disposition"]
    assert "\r" not in value and "\n" not in value
    assert value.startswith('inline; filename="a%22__Set-Cookie: stolen=1____<script>.png"')
    assert value.endswith(
        "filename*=UTF-8''a%22%0D%0ASet-Cookie%3A%20stolen%3D1%0D%0A%0D%0A%3Cscript%3E.png"
    )


# -- skip_processing and raw ---------------------------------------------------------------


def test_skip_processing_serves_the_source_itself(media: Path, send: Callable[..., Answer]) -> None:
    source = (media / LANDSCAPE).read_bytes()
    status, headers, body = send(url(f"/skp:jpg/w:50/plain/{LANDSCAPE}"), HTTP_ACCEPT="image/webp")
    assert (status, body, headers["content-type"]) == (200, source, "image/jpeg")
    assert "vary" not in headers  # the source's own format, never negotiated


def test_skip_processing_of_another_format_processes(send: Callable[..., Answer]) -> None:
    status, headers, body = send(url(f"/skp:png/w:50/plain/{LANDSCAPE}"), HTTP_ACCEPT="image/webp")
    assert (status, headers["content-type"], size_of(body)) == (200, "image/webp", (50, 38))


def test_raw_serves_the_source_whatever_the_options(
    media: Path, send: Callable[..., Answer]
) -> None:
    source = (media / LANDSCAPE).read_bytes()
    status, headers, body = send(url(f"/raw:1/w:10/bl:5/plain/{LANDSCAPE}@png"))
    assert (status, body, headers["content-type"]) == (200, source, "image/jpeg")


def test_raw_and_skip_processing_keep_the_checks_that_protect(
    media: Path, settings: Any, send: Callable[..., Answer]
) -> None:
    """Unlike imgproxy's raw: the source must be an image, its name must say its
    format, and it must be within the resolution limit."""
    (media / "photos" / "page.jpg").write_bytes(b"<html><script>alert(1)</script></html>")
    (media / "photos" / "misnamed.jpg").write_bytes(images.png_with_alpha(40, 30))
    assert send(url("/raw:1/plain/photos/page.jpg"))[0] == 422
    assert send(url("/raw:1/plain/photos/misnamed.jpg"))[0] == 415
    assert send(url(f"/raw:1/msr:0.1/plain/{LANDSCAPE}"))[0] == 422
    assert send(url(f"/skp:jpg/msr:0.1/plain/{LANDSCAPE}"))[0] == 422
    settings.OXIMG = {**settings.OXIMG, "MAX_SRC_RESOLUTION": 100_000}
    assert send(url(f"/raw:1/plain/{LANDSCAPE}"))[0] == 422


# -- limits only lower --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "path", "status"),
    [
        (400_000, f"/msr:0.3/w:50/plain/{LANDSCAPE}@png", 422),  # 640 x 480 is 0.31 MP
        (400_000, f"/msr:0.31/w:50/plain/{LANDSCAPE}@png", 200),
        (300_000, f"/msr:1000/w:50/plain/{LANDSCAPE}@png", 422),  # never above the setting
        (400_000, f"/msfs:1000/w:50/plain/{LANDSCAPE}@png", 422),
        (400_000, "/mafr:0.001/plain/photos/anim.gif@gif", 422),  # 120 x 90 frames
        (400_000, "/mafr:0.001/plain/photos/anim.gif@png", 200),  # one frame: no animation
    ],
)
def test_url_limits_can_only_lower_the_settings(
    settings: Any, send: Callable[..., Answer], limit: int, path: str, status: int
) -> None:
    settings.OXIMG = {**settings.OXIMG, "MAX_SRC_RESOLUTION": limit}
    assert send(url(path))[0] == status


def test_max_animation_frames_keeps_the_first_frame(send: Callable[..., Answer]) -> None:
    status, _, body = send(url("/maf:3/plain/photos/anim.gif@gif"))
    assert status == 200
    assert pyvips.Image.new_from_buffer(body, "").get("n-pages") == 1
    status, _, body = send(url("/maf:6/plain/photos/anim.gif@gif"))
    assert pyvips.Image.new_from_buffer(body, "").get("n-pages") == 6


# -- the site's URL rules ------------------------------------------------------------------


def test_allowed_processing_options(settings: Any, send: Callable[..., Answer]) -> None:
    settings.OXIMG = {
        **settings.OXIMG,
        "ALLOWED_PROCESSING_OPTIONS": ["w", "pr"],
        "PRESETS": {"soft": "bl:2"},
    }
    assert send(url(f"/w:50/pr:soft/plain/{LANDSCAPE}@png"))[0] == 200
    status, _, body = send(url(f"/w:50/h:20/plain/{LANDSCAPE}@png"))
    assert (status, body) == (400, b"Forbidden option: h\n")
    with pytest.raises(ThumbnailError, match="Forbidden option"):
        get_thumbnail(LANDSCAPE, "50x20")


def test_only_presets(settings: Any, send: Callable[..., Answer]) -> None:
    settings.OXIMG = {
        **settings.OXIMG,
        "ONLY_PRESETS": True,
        "PRESETS": {"small": "rs:fit:50:50", "soft": "bl:1"},
    }
    status, _, body = send(url(f"/small:soft/plain/{LANDSCAPE}@png"))
    assert (status, size_of(body)) == (200, (50, 38))
    assert send(url(f"/w:50/plain/{LANDSCAPE}@png"))[0] == 400
    thumbnail = get_thumbnail(LANDSCAPE, "", preset="small")
    assert "/small/plain/photos/landscape.jpg@jpeg" in thumbnail.url
    status, _, body = send(thumbnail.url)
    assert (status, size_of(body)) == (200, (thumbnail.width, thumbnail.height))
    with pytest.raises(ThumbnailError, match="ONLY_PRESETS"):
        get_thumbnail(LANDSCAPE, "", preset="small", quality=50)


# -- the watermark setting -----------------------------------------------------------------


def red_mark(media: Path) -> None:
    mark = pyvips.Image.black(20, 10).new_from_image([255, 0, 0]).cast("uchar")
    (media / "mark.png").write_bytes(bytes(mark.pngsave_buffer()))


def test_the_watermark_comes_from_the_setting(
    media: Path, settings: Any, send: Callable[..., Answer]
) -> None:
    assert send(url(f"/wm:1/plain/{LANDSCAPE}@png"))[0] == 400  # none set
    red_mark(media)
    settings.OXIMG = {**settings.OXIMG, "WATERMARK": "mark.png"}
    status, _, body = send(url(f"/wm:1:nowe/plain/{LANDSCAPE}@png"))
    assert status == 200
    assert pyvips.Image.new_from_buffer(body, "").getpoint(2, 2) == [255.0, 0.0, 0.0]


@pytest.mark.parametrize("name", ["../mark.png", "/etc/passwd", "photos/missing.png"])
def test_the_watermark_is_read_through_the_source_jail(
    media: Path, settings: Any, name: str
) -> None:
    red_mark(media)
    settings.OXIMG = {**settings.OXIMG, "WATERMARK": name}
    with pytest.raises(ImproperlyConfigured, match="WATERMARK"):
        runtime.get_thumbnailer()


def test_the_tag_lays_the_watermark(media: Path, settings: Any) -> None:
    red_mark(media)
    with pytest.raises(ThumbnailError, match="WATERMARK"):
        get_thumbnail(LANDSCAPE, "100", watermark=0.5)
    settings.OXIMG = {**settings.OXIMG, "WATERMARK": "mark.png"}
    before = get_thumbnail(LANDSCAPE, "100", watermark=0.5)
    assert "/wm:0.5/" in before.url
    status, _, body = through_view(before.url)
    assert (status, size_of(body)) == (200, (before.width, before.height))
    runtime.reset()  # as a new process: the same image, the same URL
    assert get_thumbnail(LANDSCAPE, "100", watermark=0.5).url == before.url
    (media / "mark.png").write_bytes(images.png_with_alpha(20, 10))
    runtime.reset()  # a new process reads the new watermark: a new URL
    assert get_thumbnail(LANDSCAPE, "100", watermark=0.5).url != before.url


# -- the tags -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("geometry", "keywords"),
    [
        ("200x100", {"options": "z:1.5"}),
        ("200x100", {"options": "z:0.5:0.25", "crop": "center"}),
        ("300x300", {"options": "exar:1"}),
        ("300x100", {"options": "exar:1:no", "crop": "center"}),
        ("120", {"pixelate": 8}),
        ("120", {"filename": "cover", "attachment": "true"}),
    ],
)
def test_the_tag_prints_the_size_that_is_served(
    media: Path, geometry: str, keywords: dict[str, Any]
) -> None:
    thumbnail = get_thumbnail(LANDSCAPE, geometry, **keywords)
    for send in SHELLS.values():
        status, headers, body = send(thumbnail.url)
        assert (status, size_of(body)) == (200, (thumbnail.width, thumbnail.height))
    if keywords.get("filename"):
        assert headers["content-disposition"] == 'attachment; filename="cover.jpg"'


@pytest.mark.parametrize(
    "keywords",
    [
        {"options": "t:10"},
        {"options": "raw:1"},
        {"options": "skp:jpg"},
        {"options": "eth:1"},
        {"preset": "trimmed"},
    ],
)
def test_the_tag_refuses_what_it_cannot_size(
    media: Path, settings: Any, keywords: dict[str, Any]
) -> None:
    settings.OXIMG = {**settings.OXIMG, "PRESETS": {"trimmed": "t:5/w:100"}}
    with pytest.raises(ThumbnailError, match="cannot know the size"):
        get_thumbnail(LANDSCAPE, "100", **keywords)


def test_with_client_hints_the_tags_urls_still_get_their_size(media: Path, settings: Any) -> None:
    settings.OXIMG = {**settings.OXIMG, "CLIENT_HINTS": True}
    thumbnail = get_thumbnail(LANDSCAPE, "x120", crop="center")
    for send in SHELLS.values():
        status, headers, body = send(thumbnail.url, HTTP_SEC_CH_WIDTH="400", HTTP_SEC_CH_DPR="2")
        assert (status, size_of(body)) == (200, (thumbnail.width, thumbnail.height))
        assert "vary" not in headers
    # A URL that leaves the width open takes the hint (384: a rung of the width ladder).
    status, headers, body = through_view(url(f"/plain/{LANDSCAPE}@png"), HTTP_SEC_CH_WIDTH="384")
    assert (status, size_of(body)) == (200, (384, 288))
    assert headers["vary"] == "Sec-CH-DPR, DPR, Sec-CH-Width, Width"


# -- enforce_thumbnail ---------------------------------------------------------------------


@pytest.mark.skipif(not pipeline.saver_available("avif"), reason="no AVIF saver")
def test_enforce_thumbnail_without_an_embedded_one_renders_the_image(
    media: Path, send: Callable[..., Answer]
) -> None:
    """libvips' AVIF saver embeds no thumbnail: the main image is what there is."""
    (media / "photos" / "still.avif").write_bytes(
        bytes(images.photo(160, 120).heifsave_buffer(compression="av1"))
    )
    info = pipeline.probe((media / "photos" / "still.avif").read_bytes())
    assert pipeline.embedded_thumbnail((media / "photos" / "still.avif").read_bytes(), info) == info
    for source in ("photos/still.avif", LANDSCAPE):
        plain = send(url(f"/w:80/plain/{source}@png"))
        forced = send(url(f"/eth:1/w:80/plain/{source}@png"))
        assert plain[0] == forced[0] == 200
        assert size_of(plain[2]) == size_of(forced[2])
        assert plain[1]["etag"] != forced[1]["etag"]  # another option, another object


@pytest.mark.skipif(not pipeline.saver_available("avif"), reason="no AVIF saver")
@pytest.mark.parametrize("options", ["w:20", "c:30:20/w:15", "rs:fill:10:10"])
def test_enforce_thumbnail_renders_the_embedded_thumbnail(
    media: Path, send: Callable[..., Answer], options: str
) -> None:
    main = pyvips.Image.black(160, 120).new_from_image([200, 30, 30]).cast("uchar")
    thumb = pyvips.Image.black(40, 30).new_from_image([30, 30, 200]).cast("uchar")
    data = images.heif_with_thumbnail(
        main.copy(interpretation="srgb"), thumb.copy(interpretation="srgb")
    )
    (media / "photos" / "thumbed.avif").write_bytes(data)
    info = pipeline.embedded_thumbnail(data, pipeline.probe(data))
    assert (info.width, info.height, info.embedded_thumbnail) == (40, 30, True)
    for prefix, blue in (("", False), ("eth:1/", True)):
        status, _, body = send(url(f"/{prefix}{options}/plain/photos/thumbed.avif@png"))
        assert status == 200
        image = pyvips.Image.new_from_buffer(body, "")
        red, _, bluish = image.getpoint(2, 2)[:3]
        # Without eth, libvips' own shrink-on-load may already take a large
        # enough thumbnail; the crop path reads the main image.
        if blue or options.startswith("c:"):
            assert (bluish > red) is blue
        planned = pipeline.plan_render(
            info if blue else pipeline.probe(data),
            parse_options(f"/{prefix}{options}/plain/a"),
            "png",
            pipeline.RenderSettings(),
        ).geometry
        assert (image.width, image.height) == (planned.width, planned.height)
