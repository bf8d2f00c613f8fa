"""get_thumbnail: tag arguments -> a signed URL and the exact output size.

The URL is checked by parsing it back the way the server does, and sizes by
fetching the URL through Django's test client and decoding what it serves.
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pyvips
from django.core.cache import BaseCache, cache, caches
from django.core.files.storage import FileSystemStorage, default_storage
from django.db.models import FileField
from django.db.models.fields.files import FieldFile
from django.template import Context, Template
from django.test import Client
from django.urls import set_script_prefix

from django_oximg import conf, runtime, thumbnails
from django_oximg.core import headers, pipeline
from django_oximg.core.errors import InvalidOptions, OximgError, SourceNotFound
from django_oximg.core.options import Gravity, Options, ParsedPath, build_path, parse_path
from django_oximg.core.options.signing import split_signed_path
from django_oximg.source_metadata import forget_source_metadata, metadata_key, source_metadata
from django_oximg.thumbnails import (
    Thumbnail,
    ThumbnailError,
    arguments_key,
    data_uri,
    get_thumbnail,
    get_thumbnailer,
    tag_options,
    url_at_resolution,
)
from tests import images

LANDSCAPE = "photos/landscape.jpg"  # 640x480, drawn by the media fixture
ALPHA = "photos/alpha.png"  # 320x240
ANIMATION = "photos/anim.gif"  # 120x90, 6 frames


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    """Start from an empty Django cache: source metadata must not leak between tests."""
    cache.clear()
    yield
    cache.clear()


def parsed(url: str, prefix: str = "/img/") -> ParsedPath:
    """Parse ``url`` as the server will: strip the mount point and the signature."""
    assert url.startswith(prefix), url
    signature, rest = split_signed_path("/" + url[len(prefix) :])
    runtime.get_signer().verify(signature, rest)
    return parse_path(rest, conf.get_settings().PRESETS)


def options_of(thumbnail: Thumbnail) -> Options:
    return parsed(thumbnail.url).options


def served(url: str, accept: str = "") -> tuple[str, pyvips.Image]:
    """Fetch ``url`` through Django and decode it: (content type, image)."""
    response = Client().get(url, HTTP_ACCEPT=accept)
    try:
        assert response.status_code == 200, (url, response.status_code)
        body = b"".join(response.streaming_content) if response.streaming else response.content
    finally:
        response.close()
    return response.headers["Content-Type"], pyvips.Image.new_from_buffer(body, "")


def served_size(thumbnail: Thumbnail) -> tuple[int, int]:
    _, image = served(thumbnail.url)
    return image.width, image.height


# -- geometry -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("geometry", "box", "size"),
    [
        ("200x100", (200, 100), (133, 100)),
        ("200", (200, 0), (200, 150)),
        ("x120", (0, 120), (160, 120)),
        (" 64x64 ", (64, 64), (64, 48)),
        ("0x120", (0, 120), (160, 120)),
    ],
)
def test_geometry_forms(
    media: Path, geometry: str, box: tuple[int, int], size: tuple[int, int]
) -> None:
    thumbnail = get_thumbnail(LANDSCAPE, geometry)
    options = options_of(thumbnail)
    assert (options.width, options.height) == box
    assert options.resizing_type == "fit"
    assert (thumbnail.width, thumbnail.height) == size
    assert served_size(thumbnail) == size


@pytest.mark.parametrize(
    "geometry",
    [
        "",
        "x",
        "0",
        "0x0",
        "abc",
        "100x",
        "100X100",
        "-100",
        "1.5x2",
        "100x100x100",
        "1234567",
        "\u0661\u0660\u0660",
    ],
)
def test_bad_geometry_is_a_thumbnail_error(media: Path, geometry: str) -> None:
    with pytest.raises(ThumbnailError, match="geometry"):
        get_thumbnail(LANDSCAPE, geometry)


def test_no_upscale_by_default(media: Path) -> None:
    """fit without enlarge: a box larger than the source gives the source's size."""
    thumbnail = get_thumbnail(LANDSCAPE, "2000")
    assert options_of(thumbnail).enlarge is False
    assert (thumbnail.width, thumbnail.height) == (640, 480)
    assert served_size(thumbnail) == (640, 480)


@pytest.mark.parametrize("upscale", [True, "true", "1"])
def test_upscale_enlarges(media: Path, upscale: Any) -> None:
    thumbnail = get_thumbnail(LANDSCAPE, "1000", upscale=upscale)
    assert options_of(thumbnail).enlarge is True
    assert (thumbnail.width, thumbnail.height) == (1000, 750)
    assert served_size(thumbnail) == (1000, 750)


@pytest.mark.parametrize("upscale", [False, "false", "False", "0", "no", None])
def test_upscale_false_spellings(media: Path, upscale: Any) -> None:
    thumbnail = get_thumbnail(LANDSCAPE, "1000", upscale=upscale)
    assert options_of(thumbnail).enlarge is False
    assert (thumbnail.width, thumbnail.height) == (640, 480)


def test_bad_upscale_is_a_thumbnail_error(media: Path) -> None:
    with pytest.raises(ThumbnailError, match="upscale"):
        get_thumbnail(LANDSCAPE, "100", upscale="maybe")


def test_crop_without_upscale_keeps_within_the_source(media: Path) -> None:
    thumbnail = get_thumbnail(ANIMATION, "200x200", crop="center")
    assert (thumbnail.width, thumbnail.height) == (120, 90)
    assert served_size(thumbnail) == (120, 90)


# -- crop -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("crop", "gravity"),
    [
        ("center", Gravity("ce")),
        ("top", Gravity("no")),
        ("bottom", Gravity("so")),
        ("left", Gravity("we")),
        ("right", Gravity("ea")),
        ("top left", Gravity("nowe")),
        ("left top", Gravity("nowe")),
        ("top right", Gravity("noea")),
        ("bottom left", Gravity("sowe")),
        ("Bottom  Right", Gravity("soea")),
        ("smart", Gravity("sm")),
        ("30% 70%", Gravity("fp", 0.3, 0.7)),
        ("0% 100%", Gravity("fp", 0.0, 1.0)),
    ],
)
def test_crop_maps_to_imgproxy_gravity(media: Path, crop: str, gravity: Gravity) -> None:
    thumbnail = get_thumbnail(LANDSCAPE, "100x100", crop=crop)
    options = options_of(thumbnail)
    assert options.resizing_type == "fill"
    assert options.gravity == gravity
    assert (thumbnail.width, thumbnail.height) == (100, 100)


@pytest.mark.parametrize(
    "crop", ["middle", "101% 0%", "30% 70% 10%", "top bottom", "10px 20px", "scale", "0,0"]
)
def test_bad_crop_is_a_thumbnail_error(media: Path, crop: str) -> None:
    with pytest.raises(ThumbnailError, match="crop"):
        get_thumbnail(LANDSCAPE, "100x100", crop=crop)


def band_mean(image: pyvips.Image, band: int) -> float:
    return float(image[band].avg())


@pytest.mark.parametrize(
    ("first", "second", "geometry", "band"),
    [
        ("top", "bottom", "100x20", 1),  # band 1 of the photo grows downwards
        ("left", "right", "20x100", 0),  # band 0 grows to the right
        ("0% 50%", "100% 50%", "20x100", 0),
    ],
)
def test_crop_gravity_is_what_gets_rendered(
    media: Path, first: str, second: str, geometry: str, band: int
) -> None:
    _, a = served(get_thumbnail(LANDSCAPE, geometry, crop=first).url)
    _, b = served(get_thumbnail(LANDSCAPE, geometry, crop=second).url)
    assert band_mean(a, band) + 100 < band_mean(b, band)


# -- format ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("jpeg", "jpeg"),
        ("jpg", "jpeg"),
        ("JPEG", "jpeg"),
        ("png", "png"),
        ("webp", "webp"),
        ("avif", "avif"),
        ("gif", "gif"),
    ],
)
def test_explicit_format(media: Path, name: str, fmt: str) -> None:
    if not pipeline.saver_available(fmt):
        pytest.skip(f"this libvips cannot save {fmt}")
    thumbnail = get_thumbnail(LANDSCAPE, "100", format=name)
    assert thumbnail.format == fmt
    assert thumbnail.url.endswith(f"@{fmt}")
    assert options_of(thumbnail).format == fmt
    content_type, image = served(thumbnail.url)
    assert content_type == pipeline.CONTENT_TYPES[fmt]
    assert (image.width, image.height) == (thumbnail.width, thumbnail.height)


@pytest.mark.parametrize(
    ("name", "fmt"),
    [(LANDSCAPE, "jpeg"), (ALPHA, "png"), (ANIMATION, "gif"), ("photos/still.webp", "webp")],
)
def test_default_format_is_the_sources(media: Path, name: str, fmt: str) -> None:
    (media / "photos" / "still.webp").write_bytes(bytes(images.photo(80, 60).webpsave_buffer()))
    thumbnail = get_thumbnail(name, "50")
    assert thumbnail.format == fmt
    assert options_of(thumbnail).format == fmt
    content_type, _ = served(thumbnail.url, accept="image/avif,image/webp,*/*")
    assert content_type == pipeline.CONTENT_TYPES[fmt]


def test_auto_format_is_negotiated(media: Path) -> None:
    thumbnail = get_thumbnail(LANDSCAPE, "100", format="auto")
    assert thumbnail.format == "auto"
    assert "@" not in thumbnail.url.rsplit("/", 1)[-1]
    assert options_of(thumbnail).format == ""
    response = Client().get(thumbnail.url, HTTP_ACCEPT="image/webp,*/*")
    response.close()
    assert response.headers["Content-Type"] == "image/webp"
    assert "Accept" in response.headers["Vary"]
    content_type, image = served(thumbnail.url, accept="image/jpeg")
    assert content_type == "image/jpeg"
    assert (image.width, image.height) == (thumbnail.width, thumbnail.height)


@pytest.mark.parametrize("template", [False, True])
def test_best_format_prints_a_url_chosen_per_accept(media: Path, template: bool) -> None:
    if template:
        text = Template(
            "{% load oximg %}{% thumbnail src '100' format='best' as t %}"
            "{{ t.url }}{% endthumbnail %}"
        ).render(Context({"src": LANDSCAPE}))
        thumbnail = get_thumbnail(LANDSCAPE, "100", format="best")
        assert text == thumbnail.url
    else:
        thumbnail = get_thumbnail(LANDSCAPE, "100", format="BEST")
    assert thumbnail.format == "best"
    assert thumbnail.url.endswith("@best")
    assert options_of(thumbnail).format == "best"
    types = set()
    for accept in ("image/avif,image/webp,*/*", "image/webp,*/*", "*/*"):
        response = Client().get(thumbnail.url, HTTP_ACCEPT=accept)
        response.close()
        assert response.headers["Vary"] == "Accept"
        types.add(response.headers["Content-Type"])
        _, image = served(thumbnail.url, accept=accept)
        assert (image.width, image.height) == (thumbnail.width, thumbnail.height)
    assert "image/jpeg" in types
    assert types <= {"image/avif", "image/webp", "image/jpeg"}


def test_unknown_format_is_a_thumbnail_error(media: Path) -> None:
    with pytest.raises(ThumbnailError, match="format"):
        get_thumbnail(LANDSCAPE, "100", format="bmp")


# -- other keywords -------------------------------------------------------------


def test_quality_goes_into_the_url_and_the_bytes(media: Path) -> None:
    low = get_thumbnail(LANDSCAPE, "300", quality=20)
    high = get_thumbnail(LANDSCAPE, "300", quality=95)
    assert options_of(low).quality == 20
    assert low.url != high.url
    sizes = []
    for thumbnail in (low, high):
        response = Client().get(thumbnail.url)
        sizes.append(int(response.headers["Content-Length"]))
        response.close()
    assert sizes[0] < sizes[1]


def test_bad_quality(media: Path) -> None:
    with pytest.raises(ThumbnailError, match="quality"):
        get_thumbnail(LANDSCAPE, "100", quality="high")
    with pytest.raises(InvalidOptions, match="quality"):
        get_thumbnail(LANDSCAPE, "100", quality=101)


def test_quality_mode_goes_into_the_url(media: Path) -> None:
    """``quality_mode="high"``: the URL's ``qm:high``, another URL, the same size."""
    high = get_thumbnail(LANDSCAPE, "300", quality_mode="high")
    standard = get_thumbnail(LANDSCAPE, "300")
    assert options_of(high).quality_mode == "high"
    assert high.url != standard.url
    assert served_size(high) == served_size(standard) == (high.width, high.height)
    with pytest.raises(ThumbnailError, match="quality_mode"):
        get_thumbnail(LANDSCAPE, "300", quality_mode="best")


def served_bytes(thumbnail: Thumbnail) -> int:
    response = Client().get(thumbnail.url)
    assert response.status_code == 200
    size = int(response.headers["Content-Length"])
    response.close()
    return size


def test_autoquality_goes_into_the_url_and_the_search(media: Path) -> None:
    """``autoquality="size:..."``: the URL's ``aq``, and a result within its byte target."""
    fixed = get_thumbnail(LANDSCAPE, "300", format="jpeg")
    fixed_bytes = served_bytes(fixed)
    target = fixed_bytes // 2
    searched = get_thumbnail(LANDSCAPE, "300", format="jpeg", autoquality=f"size:{target}:5:80")
    aq = options_of(searched).autoquality
    assert (aq.method, aq.target, aq.min_quality, aq.max_quality) == ("size", target, 5, 80)
    assert searched.url != fixed.url
    assert served_bytes(searched) <= target
    with pytest.raises(ThumbnailError, match="autoquality"):
        get_thumbnail(LANDSCAPE, "300", autoquality="fancy")


def test_autoquality_none_turns_the_site_setting_off_for_a_tag(media: Path, settings: Any) -> None:
    settings.OXIMG = {**settings.OXIMG, "AUTOQUALITY": {"METHOD": "size", "TARGET": 1000, "MIN": 5}}
    site_wide = get_thumbnail(LANDSCAPE, "300", format="jpeg")
    off = get_thumbnail(LANDSCAPE, "300", format="jpeg", autoquality="none")
    assert options_of(off).autoquality.method == "none"
    assert served_bytes(site_wide) <= 1000 < served_bytes(off)


def test_effects_and_dpr(media: Path) -> None:
    thumbnail = get_thumbnail(
        LANDSCAPE, "200", blur=1.5, sharpen="0.5", dpr=2, background="#FF8000"
    )
    options = options_of(thumbnail)
    assert (options.blur, options.sharpen, options.dpr) == (1.5, 0.5, 2.0)
    assert options.background == (255, 128, 0)
    assert (thumbnail.width, thumbnail.height) == (400, 300)
    assert served_size(thumbnail) == (400, 300)


def test_bad_background(media: Path) -> None:
    with pytest.raises(ThumbnailError, match="background"):
        get_thumbnail(LANDSCAPE, "100", background="red")


def test_unknown_keyword(media: Path) -> None:
    with pytest.raises(ThumbnailError, match=r"colour, rounded \(rounded: no equivalent\)"):
        get_thumbnail(LANDSCAPE, "100", rounded=3, colour="red")


def test_preset(media: Path, settings: Any) -> None:
    settings.OXIMG = {
        **settings.OXIMG,
        "PRESETS": {"card": "rs:fill:300:200/q:70", "webpcard": "pr:card/f:webp"},
    }
    thumbnail = get_thumbnail(LANDSCAPE, "90x90", preset="card")
    assert "/pr:card/" in thumbnail.url
    options = options_of(thumbnail)
    assert (options.resizing_type, options.width, options.height) == ("fill", 90, 90)
    assert options.quality == 70
    assert (thumbnail.width, thumbnail.height) == (90, 90)
    assert served_size(thumbnail) == (90, 90)


def test_a_presets_format_is_kept_when_the_tag_names_none(media: Path, settings: Any) -> None:
    settings.OXIMG = {**settings.OXIMG, "PRESETS": {"webpcard": "rs:fill/f:webp"}}
    thumbnail = get_thumbnail(LANDSCAPE, "90x60", preset="webpcard")
    assert thumbnail.format == "webp"
    content_type, image = served(thumbnail.url)
    assert content_type == "image/webp"
    assert (image.width, image.height) == (90, 60)
    assert get_thumbnail(LANDSCAPE, "90x60", preset="webpcard", format="png").format == "png"


def test_unknown_preset(media: Path) -> None:
    with pytest.raises(InvalidOptions, match="preset"):
        get_thumbnail(LANDSCAPE, "100", preset="nope")


@pytest.mark.parametrize(
    ("raw", "size"),
    [("rot:90", (150, 200)), ("/rot:270/", (150, 200)), ("rot:90/fl:1:0", (150, 200))],
)
def test_raw_options_pass_through(media: Path, raw: str, size: tuple[int, int]) -> None:
    thumbnail = get_thumbnail(LANDSCAPE, "200x200", options=raw)
    assert options_of(thumbnail).rotate in (90, 270)
    assert (thumbnail.width, thumbnail.height) == size
    assert served_size(thumbnail) == size


def test_the_tags_keywords_win_over_raw_options(media: Path) -> None:
    thumbnail = get_thumbnail(LANDSCAPE, "100", options="w:300/q:10", quality=50)
    options = options_of(thumbnail)
    assert (options.width, options.quality) == (100, 50)


def test_bad_raw_options(media: Path) -> None:
    with pytest.raises(InvalidOptions, match="nonsense"):
        get_thumbnail(LANDSCAPE, "100", options="nonsense:1")


# -- sources --------------------------------------------------------------------


def test_thumbnail_str_is_its_url(media: Path) -> None:
    thumbnail = get_thumbnail(LANDSCAPE, "100")
    assert str(thumbnail) == thumbnail.url
    assert parsed(thumbnail.url).source == LANDSCAPE


def test_exif_orientation_is_applied_to_the_size(media: Path) -> None:
    stored = images.photo(640, 480).copy()
    stored.set_type(pyvips.GValue.gint_type, "orientation", 6)
    (media / "photos" / "turned.jpg").write_bytes(bytes(stored.jpegsave_buffer()))
    thumbnail = get_thumbnail("photos/turned.jpg", "300x300")
    assert (thumbnail.width, thumbnail.height) == (225, 300)
    assert served_size(thumbnail) == (225, 300)


@pytest.mark.parametrize("name", ["photos/my photo.jpg", "photos/été.jpg", "photos/a&b'<x>.jpg"])
def test_names_that_are_not_url_safe_are_base64_encoded(media: Path, name: str) -> None:
    (media / name).write_bytes(images.jpeg(64, 48))
    thumbnail = get_thumbnail(name, "32")
    assert "/plain/" not in thumbnail.url
    assert parsed(thumbnail.url).source == name
    assert served_size(thumbnail) == (32, 24)


def test_missing_source(media: Path) -> None:
    with pytest.raises(SourceNotFound):
        get_thumbnail("photos/nothing.jpg", "100")


@pytest.mark.parametrize("name", ["../secret.jpg", "/etc/passwd", "photos/../../x.jpg"])
def test_names_outside_the_storage_are_not_found(media: Path, name: str) -> None:
    with pytest.raises(SourceNotFound):
        get_thumbnail(name, "100")


def test_a_source_that_is_not_an_image(media: Path) -> None:
    (media / "photos" / "notes.jpg").write_bytes(b"<html>not an image</html>")
    with pytest.raises(OximgError):
        get_thumbnail("photos/notes.jpg", "100")


def test_no_source(media: Path) -> None:
    with pytest.raises(ThumbnailError, match="no source"):
        get_thumbnail("", "100")


def replace_source(path: Path, data: bytes, bump_seconds: int) -> None:
    """Rewrite ``path`` and move its mtime forward, as a re-upload would."""
    before = path.stat()
    path.write_bytes(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + bump_seconds * 10**9))


def test_replacing_the_source_changes_the_url_and_size(media: Path) -> None:
    first = get_thumbnail(LANDSCAPE, "100")
    assert get_thumbnail(LANDSCAPE, "100") == first
    replace_source(media / LANDSCAPE, images.jpeg(400, 400), bump_seconds=5)
    second = get_thumbnail(LANDSCAPE, "100")
    assert second.url != first.url
    assert (second.width, second.height) == (100, 100)
    assert served_size(second) == (100, 100)


def test_touching_the_source_changes_the_url(media: Path) -> None:
    """Same bytes, newer mtime: a new version (a CDN may hold the old bytes)."""
    first = get_thumbnail(LANDSCAPE, "100")
    path = media / LANDSCAPE
    replace_source(path, path.read_bytes(), bump_seconds=5)
    assert get_thumbnail(LANDSCAPE, "100").url != first.url


def test_the_version_token_is_a_cachebuster_over_the_source_version(
    media: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = options_of(get_thumbnail(LANDSCAPE, "100"))
    assert options.cachebuster
    store = runtime.get_source_resolver().stores[""]
    monkeypatch.setattr(store, "version", lambda name: "another version")
    assert options_of(get_thumbnail(LANDSCAPE, "100")).cachebuster != options.cachebuster


@pytest.fixture
def source_reads(media: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names whose header was read from the default source store, in order."""
    store = runtime.get_source_resolver().stores[""]
    read_header = store.read_header
    names: list[str] = []

    def counting_read_header(name: str, limit: int) -> bytes:
        names.append(name)
        return read_header(name, limit)

    monkeypatch.setattr(store, "read_header", counting_read_header)
    monkeypatch.setattr(store, "read", lambda *args: pytest.fail("read a whole source"))
    return names


def test_the_header_is_read_once_then_cached(source_reads: list[str]) -> None:
    first = get_thumbnail(LANDSCAPE, "100")
    assert source_reads == [LANDSCAPE]
    for geometry in ("100", "200x50", "x30"):
        get_thumbnail(LANDSCAPE, geometry, crop="center")
    assert source_reads == [LANDSCAPE]
    cache.clear()  # a local file's metadata is held in the process too, checked by stat
    assert get_thumbnail(LANDSCAPE, "100") == first
    assert source_reads == [LANDSCAPE]
    forget_source_metadata(LANDSCAPE)  # what a purge does
    assert get_thumbnail(LANDSCAPE, "100") == first
    assert source_reads == [LANDSCAPE, LANDSCAPE]


def test_a_replaced_source_is_read_again(source_reads: list[str], media: Path) -> None:
    get_thumbnail(LANDSCAPE, "100")
    replace_source(media / LANDSCAPE, images.jpeg(300, 200), bump_seconds=2)
    assert get_thumbnail(LANDSCAPE, "300").height == 200
    assert source_reads == [LANDSCAPE, LANDSCAPE]


# -- FieldFile ------------------------------------------------------------------


def field_file(storage: Any, name: str | None) -> FieldFile:
    return FieldFile(instance=None, field=FileField(storage=storage), name=name)


def test_a_field_file_on_the_default_storage(media: Path) -> None:
    thumbnail = get_thumbnail(field_file(default_storage, LANDSCAPE), "160")
    assert parsed(thumbnail.url).source == LANDSCAPE
    assert (thumbnail.width, thumbnail.height) == (160, 120)
    assert served_size(thumbnail) == (160, 120)


def test_a_field_file_on_another_oximg_source(media: Path, settings: Any, tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    (archive / "old").mkdir(parents=True)
    (archive / "old" / "scan.png").write_bytes(images.png_with_alpha(100, 50))
    settings.STORAGES = {
        **settings.STORAGES,
        "archive": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(archive)},
        },
    }
    settings.OXIMG = {**settings.OXIMG, "SOURCES": {"old": "archive"}}
    storage = FileSystemStorage(location=str(archive))  # an equal instance, not the same one
    thumbnail = get_thumbnail(field_file(storage, "old/scan.png"), "50")
    assert parsed(thumbnail.url).source == "old:old/scan.png"
    assert thumbnail.format == "png"
    assert served_size(thumbnail) == (50, 25)


def archive_source(settings: Any, tmp_path: Path) -> Path:
    """A second source, ``other``, on a directory of its own."""
    archive = tmp_path / "archive"
    archive.mkdir()
    settings.STORAGES = {
        **settings.STORAGES,
        "archive": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(archive)},
        },
    }
    settings.OXIMG = {**settings.OXIMG, "SOURCES": {"other": "archive"}}
    return archive


def test_a_default_name_that_looks_like_another_source(
    media: Path, settings: Any, tmp_path: Path
) -> None:
    """``other:c.jpg`` in the default storage is that file, not ``c.jpg`` of ``other``."""
    (media / "other:c.jpg").write_bytes(images.jpeg(100, 50))
    (archive_source(settings, tmp_path) / "c.jpg").write_bytes(images.jpeg(300, 200))
    thumbnail = get_thumbnail(field_file(default_storage, "other:c.jpg"), "80")
    assert parsed(thumbnail.url).source == ":other:c.jpg"
    assert (thumbnail.width, thumbnail.height) == (80, 40)
    assert served_size(thumbnail) == (80, 40)


def test_a_default_name_that_looks_like_a_url_is_never_fetched(media: Path, settings: Any) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        prefix = f"http://127.0.0.1:{listener.getsockname()[1]}/"
        name = prefix + "x.jpg"
        settings.OXIMG = {
            **settings.OXIMG,
            "HTTP_SOURCES": [prefix],
            "HTTP_ALLOW_PRIVATE_NETWORKS": True,
            "HTTP_TIMEOUT": 0.5,  # bounds the test without the fix, which waits for an answer
        }
        with pytest.raises(SourceNotFound):  # a name with an empty segment: no file has it
            get_thumbnail(field_file(default_storage, name), "80")
        # What a tag would write for it is a 404 from the server too.
        path = runtime.get_signer().signed_path(f"/rs:fit:80:80/plain/:{name}@jpg")
        assert Client().get(f"/img{path}").status_code == 404
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing ever connected
            listener.accept()


def test_an_ordinary_field_file_name_keeps_its_url(media: Path) -> None:
    """Only names that could be misread are written otherwise: these URLs are unchanged."""
    url = get_thumbnail(field_file(default_storage, LANDSCAPE), "80").url
    assert url.endswith(f"/w:80/cb:{parsed(url).options.cachebuster}/plain/{LANDSCAPE}@jpeg")
    assert url == get_thumbnail(LANDSCAPE, "80").url


def test_a_field_file_on_a_storage_that_is_no_source(media: Path, tmp_path: Path) -> None:
    elsewhere = FileSystemStorage(location=str(tmp_path / "elsewhere"))
    with pytest.raises(ThumbnailError, match=r"not an OXIMG source.*OXIMG\['SOURCES'\]"):
        get_thumbnail(field_file(elsewhere, "photos/landscape.jpg"), "100")


def test_an_empty_field_file(media: Path) -> None:
    with pytest.raises(ThumbnailError, match="empty"):
        get_thumbnail(field_file(default_storage, None), "100")


# -- where URLs point -----------------------------------------------------------


def test_the_mounted_urlconf_prefix_wins(media: Path, settings: Any) -> None:
    settings.OXIMG = {**settings.OXIMG, "URL_PREFIX": "/elsewhere/"}
    assert get_thumbnail(LANDSCAPE, "100").url.startswith("/img/")


def test_url_prefix_without_the_urlconf(media: Path, settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.urls_empty"
    settings.OXIMG = {**settings.OXIMG, "URL_PREFIX": "/elsewhere/"}
    thumbnail = get_thumbnail(LANDSCAPE, "100")
    assert thumbnail.url.startswith("/elsewhere/")
    assert parsed(thumbnail.url, prefix="/elsewhere/").source == LANDSCAPE


def test_url_prefix_default_without_the_urlconf(media: Path, settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.urls_empty"
    assert get_thumbnail(LANDSCAPE, "100").url.startswith("/img/")


# -- a URL changes whenever its image does ------------------------------------------------


def server_key(url: str) -> str:
    """The result cache key the server uses for a tag's URL."""
    return runtime.get_thumbnailer().job_for(url.removeprefix("/img"), "").key


def test_an_edited_preset_gives_a_new_url_and_key(settings: Any, media: Path) -> None:
    settings.OXIMG = {**settings.OXIMG, "PRESETS": {"avatar": "rs:fill:50:50"}}
    before = get_thumbnail(LANDSCAPE, "", preset="avatar")
    before_key = server_key(before.url)
    settings.OXIMG = {**settings.OXIMG, "PRESETS": {"avatar": "rs:fill:64:64"}}
    after = get_thumbnail(LANDSCAPE, "", preset="avatar")
    assert (before.width, after.width) == (50, 64)
    assert after.url != before.url
    assert server_key(after.url) != before_key
    # The URL still names the preset; its expansion is in the version token.
    assert "/pr:avatar/" in after.url


def test_an_edited_default_preset_gives_new_urls(settings: Any, media: Path) -> None:
    settings.OXIMG = {**settings.OXIMG, "PRESETS": {"default": "q:70"}}
    before = get_thumbnail(LANDSCAPE, "100")
    settings.OXIMG = {**settings.OXIMG, "PRESETS": {"default": "q:40"}}
    assert get_thumbnail(LANDSCAPE, "100").url != before.url


def test_a_changed_output_setting_gives_a_new_url_and_key(settings: Any, media: Path) -> None:
    before = get_thumbnail(LANDSCAPE, "100")
    before_key = server_key(before.url)
    settings.OXIMG = {**settings.OXIMG, "QUALITY": {"jpeg": 50}}
    after = get_thumbnail(LANDSCAPE, "100")
    assert after.url != before.url
    assert server_key(after.url) != before_key


def test_unchanged_settings_keep_urls_and_keys_across_restarts(settings: Any, media: Path) -> None:
    settings.OXIMG = {**settings.OXIMG, "PRESETS": {"avatar": "rs:fill:50:50"}}
    before = get_thumbnail(LANDSCAPE, "", preset="avatar")
    before_key = server_key(before.url)
    # A deploy that changes nothing about output: a fresh process state.
    settings.OXIMG = {**settings.OXIMG, "WORKERS": 1, "RENDER_TIMEOUT": 3.0}
    cache.clear()
    after = get_thumbnail(LANDSCAPE, "", preset="avatar")
    assert after.url == before.url
    assert server_key(after.url) == before_key


# -- what templates written for sorl-thumbnail and easy-thumbnails read -------------------


def test_the_thumbnail_has_sorl_thumbnails_attributes(media: Path) -> None:
    landscape = get_thumbnail(LANDSCAPE, "200")
    assert (landscape.x, landscape.y, landscape.size) == (200, 150, [200, 150])
    assert landscape.ratio == 200 / 150
    assert landscape.is_portrait is False
    assert get_thumbnail(LANDSCAPE, "100x200", crop="center").is_portrait is True


PRESETS = {
    "avatar": "rs:fill:50:50/g:ce",
    "card": "rs:fill:300:200",
    "testapp.card": "rs:fill:240:160",
    "testapp.Photo.image.card": "rs:fill:120:80",
}


@pytest.fixture
def presets(settings: Any) -> None:
    settings.OXIMG = {**settings.OXIMG, "PRESETS": PRESETS}


def test_a_preset_needs_no_geometry(media: Path, presets: None) -> None:
    thumbnail = get_thumbnail(LANDSCAPE, preset="avatar")
    assert (thumbnail.width, thumbnail.height) == (50, 50)
    assert served_size(thumbnail) == (50, 50)


def test_a_geometry_that_names_a_preset_is_the_preset(media: Path, presets: None) -> None:
    assert get_thumbnail(LANDSCAPE, "avatar") == get_thumbnail(LANDSCAPE, preset="avatar")
    with pytest.raises(ThumbnailError, match="bad geometry 'avtar'"):
        get_thumbnail(LANDSCAPE, "avtar")


@pytest.mark.parametrize(
    ("model", "field", "size"),
    [
        ("Photo", "image", (120, 80)),  # testapp.Photo.image.card
        ("Document", "scan", (240, 160)),  # testapp.card: the app's
        (None, None, (300, 200)),  # a plain name: the global card
    ],
)
def test_presets_are_scoped_as_easy_thumbnails_scopes_aliases(
    media: Path, presets: None, model: str | None, field: str | None, size: tuple[int, int]
) -> None:
    from tests.testapp import models

    source: Any = LANDSCAPE
    if model and field:
        source = getattr(getattr(models, model)(**{field: LANDSCAPE}), field)
    thumbnail = get_thumbnail(source, preset="card")
    assert (thumbnail.width, thumbnail.height) == size
    assert served_size(thumbnail) == size


def test_get_thumbnailer_gives_aliases_and_option_dicts(media: Path, presets: None) -> None:
    from tests.testapp.models import Photo

    thumbnailer = get_thumbnailer(Photo(image=LANDSCAPE).image)
    assert (thumbnailer["card"].width, thumbnailer["card"].height) == (120, 80)
    with pytest.raises(KeyError):
        thumbnailer["nope"]
    cropped = thumbnailer.get_thumbnail({"size": (100, 100), "crop": True, "quality": 50})
    assert cropped == get_thumbnail(LANDSCAPE, "100x100", crop="center", quality=50)
    assert thumbnailer.get_thumbnail({"size": (100, 0)}).size == [100, 75]
    assert thumbnailer.get_thumbnail({"size": (0, 30)}).size == [40, 30]


def test_tag_defaults_fill_in_what_a_call_leaves_out(media: Path, settings: Any) -> None:
    settings.OXIMG = {**settings.OXIMG, "TAG_DEFAULTS": {"upscale": True, "quality": 60}}
    enlarged = get_thumbnail(LANDSCAPE, "1000")
    assert (enlarged.width, enlarged.height) == (1000, 750)
    assert options_of(enlarged).quality == 60
    kept = get_thumbnail(LANDSCAPE, "1000", upscale=False, quality=90)
    assert (kept.width, kept.height) == (640, 480)
    assert options_of(kept).quality == 90


def colour_near(pixel: list[float], rgb: tuple[int, int, int]) -> bool:
    return all(abs(value - wanted) <= 4 for value, wanted in zip(pixel[:3], rgb, strict=True))


def test_padding_fills_the_box_with_the_padding_colour(media: Path) -> None:
    thumbnail = get_thumbnail(LANDSCAPE, "200x200", padding=True, padding_color="#f00")
    assert (thumbnail.width, thumbnail.height) == (200, 200)
    _, image = served(thumbnail.url)
    assert (image.width, image.height) == (200, 200)
    assert colour_near(image(100, 2), (255, 0, 0))  # the band above, JPEG-encoded
    white = get_thumbnail(LANDSCAPE, "200x200", padding=True)
    _, image = served(white.url)
    assert colour_near(image(100, 2), (255, 255, 255))
    unpadded = get_thumbnail(LANDSCAPE, "200x200", padding=False, padding_color="f00")
    assert (unpadded.width, unpadded.height) == (200, 150)


@pytest.mark.parametrize(
    ("sizing", "geometry", "size"),
    [
        ("imgproxy", "150", (150, 113)),
        ("sorl", "150", (149, 112)),
        ("easy-thumbnails", "150", (150, 112)),
        ("sorl", "x113", (151, 113)),
    ],
)
def test_sizing_chooses_whose_rounding(
    media: Path, sizing: str, geometry: str, size: tuple[int, int]
) -> None:
    thumbnail = get_thumbnail(LANDSCAPE, geometry, sizing=sizing)
    assert (thumbnail.width, thumbnail.height) == size
    assert served_size(thumbnail) == size


@pytest.mark.parametrize(("sizing", "first_column"), [("sorl", 0), ("imgproxy", 1)])
def test_sorl_sizing_cuts_a_centre_crop_where_sorl_cuts(
    media: Path, sizing: str, first_column: int
) -> None:
    """One pixel to cut from 101: sorl keeps column 0 (int(0.5)), imgproxy's centre drops it."""
    columns = pyvips.Image.xyz(101, 50)[0].cast("uchar")  # each pixel's value is its column
    (media / "photos" / "columns.png").write_bytes(columns.pngsave_buffer())
    thumbnail = get_thumbnail("photos/columns.png", "100x50", crop="center", sizing=sizing)
    _, image = served(thumbnail.url)
    assert (image.width, image.height) == (100, 50)
    assert [image(x, 25)[0] for x in (0, 99)] == [first_column, first_column + 99]


@pytest.mark.parametrize(
    ("factor", "size"), [("2x", (200, 150)), ("1.5x", (150, 113)), (3, (300, 225))]
)
def test_url_at_resolution(media: Path, factor: Any, size: tuple[int, int]) -> None:
    thumbnail = get_thumbnail(LANDSCAPE, "100", crop="center", quality=70)
    url = url_at_resolution(thumbnail, factor)
    assert url == url_at_resolution(thumbnail.url, factor)
    options = parsed(url).options
    assert (options.quality, options.resizing_type) == (70, "fill")
    assert served_size(Thumbnail(url, 0, 0, "")) == size


def test_url_at_resolution_without_upscale_stops_at_the_source(media: Path) -> None:
    big = url_at_resolution(get_thumbnail(LANDSCAPE, "400"), "2x")
    assert served_size(Thumbnail(big, 0, 0, "")) == (640, 480)


@pytest.mark.parametrize(
    ("url", "factor", "error"),
    [
        ("/media/photos/landscape.jpg", "2x", ThumbnailError),
        (
            "/img/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/w:100/plain/photos/x.jpg",
            "2x",
            OximgError,
        ),
        (None, "9x", ThumbnailError),
        (None, "twice", ThumbnailError),
    ],
)
def test_url_at_resolution_signs_only_its_own_urls(
    media: Path, url: str | None, factor: str, error: type[Exception]
) -> None:
    with pytest.raises(error):
        url_at_resolution(url or get_thumbnail(LANDSCAPE, "100").url, factor)


def test_data_uri_inlines_the_served_image(media: Path) -> None:
    thumbnail = get_thumbnail(ALPHA, "40x30", crop="center")
    uri = data_uri(thumbnail)
    head, _, payload = uri.partition(",")
    assert head == "data:image/png;base64"
    image = pyvips.Image.new_from_buffer(base64.b64decode(payload), "")
    assert (image.width, image.height) == (40, 30)
    content_type, served_image = served(thumbnail.url)
    assert content_type == "image/png"
    assert served_image.avg() == image.avg()
    assert data_uri(thumbnail.url) == uri  # a hit now, the same bytes


def test_data_uri_of_a_source_gone_missing(media: Path) -> None:
    thumbnail = get_thumbnail(LANDSCAPE, "40")
    os.remove(media / LANDSCAPE)
    with pytest.raises(ThumbnailError, match="could not be made: 404"):
        data_uri(thumbnail)


# -- the metadata cache and the cost of a tag ----------------------------------------------


def test_metadata_lives_in_the_metadata_cache_alias(media: Path, settings: Any) -> None:
    settings.CACHES = {
        **settings.CACHES,
        "sizes": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "m"},
    }
    settings.OXIMG = {**settings.OXIMG, "METADATA_CACHE": "sizes"}
    get_thumbnail(LANDSCAPE, "100")
    assert caches["sizes"].get(metadata_key(LANDSCAPE)) is not None
    assert cache.get(metadata_key(LANDSCAPE)) is None


class DownCache(BaseCache):
    """A metadata cache whose server is down (each call raises, as RedisCache does)."""

    calls = 0

    def __init__(self, location: str, params: dict[str, Any]) -> None:
        super().__init__(params)

    def get(self, *args: Any, **kwargs: Any) -> Any:
        DownCache.calls += 1
        raise ConnectionError("Error 111 connecting to redis")

    set = get


def test_a_metadata_cache_that_fails_is_left_alone_and_pages_still_render(
    media: Path, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A Redis that is down (or frozen) neither fails nor stalls every tag of a page."""
    settings.CACHES = {**settings.CACHES, "down": {"BACKEND": f"{__name__}.DownCache"}}
    settings.OXIMG = {**settings.OXIMG, "METADATA_CACHE": "down"}
    DownCache.calls = 0
    first = get_thumbnail(LANDSCAPE, "100")
    second = get_thumbnail("photos/alpha.png", "100")
    assert (first.width, first.height) == (100, 75)
    assert second.url.endswith("alpha.png@png")
    assert DownCache.calls == 1  # the second tag did not ask the cache that had just failed
    assert "metadata cache failed" in caplog.text


def test_a_header_the_reader_cannot_answer_is_read_by_libvips(media: Path) -> None:
    """A frame header past the last prefix read: the whole file goes to libvips."""
    photo = images.jpeg(64, 48)
    segment = b"\xff\xed" + (60_002).to_bytes(2, "big") + bytes(60_000)
    count = headers.MAX_READ // 60_000 + 1
    (media / "photos" / "far.jpg").write_bytes(photo[:2] + segment * count + photo[2:])
    thumbnail = get_thumbnail("photos/far.jpg", "32")
    assert (thumbnail.width, thumbnail.height) == (32, 24)


def test_the_url_is_made_as_its_parts_say(media: Path) -> None:
    """The signed path and its version token, spelled out: a cached result is the same."""
    meta = source_metadata(LANDSCAPE)
    options = tag_options("100x50", {"crop": "center"})._replace(format="jpeg")
    effective = parse_path(build_path(options, LANDSCAPE)).options
    text = "\n".join(
        (meta.version, runtime.get_output_fingerprint(), build_path(effective, LANDSCAPE))
    )
    version = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = build_path(options._replace(cachebuster=version), LANDSCAPE)
    expected = "/img" + runtime.get_signer().signed_path(path)
    for _ in range(2):  # computed, then kept
        assert get_thumbnail(LANDSCAPE, "100x50", crop="center").url == expected


class Colour(str):
    """A template value that is text but cannot be a dict key."""

    __hash__ = None  # type: ignore[assignment]


def test_arguments_that_cannot_be_kept_are_computed_every_time(media: Path) -> None:
    plain = get_thumbnail(LANDSCAPE, "100", background="ff0000")
    assert get_thumbnail(LANDSCAPE, "100", background=Colour("ff0000")) == plain


def test_equal_arguments_of_other_types_are_different_requests() -> None:
    assert arguments_key("100", {"crop": True}) != arguments_key("100", {"crop": 1})
    assert arguments_key("100", {"quality": 80}) == arguments_key("100", {"quality": 80})
    assert arguments_key("100", {"b": 1, "a": 2}) == arguments_key("100", {"a": 2, "b": 1})


def test_the_mount_point_follows_the_script_prefix(media: Path) -> None:
    try:
        set_script_prefix("/site/")
        assert get_thumbnail(LANDSCAPE, "100").url.startswith("/site/img/")
    finally:
        set_script_prefix("/")
    assert get_thumbnail(LANDSCAPE, "100").url.startswith("/img/")


def test_a_page_rendered_again_costs_a_stat_per_tag(
    media: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No header read, no cache read, no URL reversing: one stat of each local source."""
    store = runtime.get_source_resolver().stores[""]
    page = [(name, geometry) for name in (LANDSCAPE, ALPHA) for geometry in ("50", "80x80")]
    first = [get_thumbnail(name, geometry, crop="center") for name, geometry in page]
    calls: list[str] = []
    version = store.version
    monkeypatch.setattr(store, "version", lambda name: calls.append("stat") or version(name))
    monkeypatch.setattr(store, "read_header", lambda *args: calls.append("header"))
    monkeypatch.setattr(cache, "get", lambda *args: calls.append("cache"))
    monkeypatch.setattr(thumbnails, "reverse", lambda *args, **kwargs: calls.append("reverse"))
    again = [get_thumbnail(name, geometry, crop="center") for name, geometry in page]
    assert again == first
    assert calls == ["stat"] * len(page)
