"""{% thumbnail %} and {% thumbnail_url %}: syntax, escaping, errors, and sizes.

The central promise: ``t.width``/``t.height`` equal the size of the image the
URL serves. It is checked by fetching every URL of a grid (geometry x crop on
four kinds of source, and each format) through Django and decoding the response.
"""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pyvips
from django.core.cache import cache
from django.core.files.storage import FileSystemStorage, default_storage
from django.db.models import FileField
from django.db.models.fields.files import FieldFile
from django.template import Context, Template, TemplateSyntaxError
from django.test import Client

from django_oximg import runtime, source_metadata, tag_functions
from django_oximg.core import headers, pipeline
from django_oximg.core.errors import SourceNotFound
from django_oximg.thumbnails import ThumbnailError
from tests import bombs, images

LANDSCAPE = "photos/landscape.jpg"  # 640x480
ALPHA = "photos/alpha.png"  # 320x240 with a transparent surround
ANIMATION = "photos/anim.gif"  # 120x90, 6 frames
TURNED = "photos/turned.jpg"  # stored 640x480 with EXIF orientation 6: shown 480x640

BLOCK = (
    "{% load oximg %}"
    "{% thumbnail source geometry crop=crop format=format as t %}"
    "{{ t.url }} {{ t.width }} {{ t.height }} {{ t.format }}"
    "{% empty %}EMPTY{% endthumbnail %}"
)


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def sources(media: Path) -> Path:
    """The media fixture plus a JPEG whose EXIF says "rotate 90 degrees clockwise"."""
    stored = images.photo(640, 480).copy()
    stored.set_type(pyvips.GValue.gint_type, "orientation", 6)
    (media / TURNED).write_bytes(bytes(stored.jpegsave_buffer(Q=85)))
    return media


def render(text: str, **context: Any) -> str:
    return Template(text).render(Context(context))


def fetch(url: str, accept: str = "") -> tuple[str, bytes]:
    response = Client().get(url, HTTP_ACCEPT=accept)
    try:
        assert response.status_code == 200, (url, response.status_code)
        body = b"".join(response.streaming_content) if response.streaming else response.content
    finally:
        response.close()
    return response.headers["Content-Type"], body


# -- the size grid --------------------------------------------------------------

GEOMETRIES = ("200x100", "100x200", "150", "x60", "2000")
CROPS = (None, "center", "smart", "top left", "30% 70%")
FORMATS = (None, "jpeg", "png", "webp", "avif", "gif", "auto")

#: What a current browser sends for images; "auto" answers AVIF or WebP to it.
BROWSER_ACCEPT = "image/avif,image/webp,image/apng,image/*,*/*;q=0.8"


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f or "default")
@pytest.mark.parametrize("source", [LANDSCAPE, TURNED, ALPHA, ANIMATION])
def test_tag_size_is_the_served_size(sources: Path, source: str, fmt: str | None) -> None:
    """Every geometry with every crop in the default format; in each other format, every
    geometry and every crop once (paired).

    The tag computes the size without the format (``thumbnails.py`` plans the
    geometry from the source's size and the options), and each format's
    render has the planned size for every resizing type
    (test_pipeline.py::test_every_resizing_type_and_format): so the whole grid
    in every format would repeat the default format's sizes.
    """
    for saver in ("avif", "webp", "gif"):
        if fmt == saver and not pipeline.saver_available(saver):
            pytest.skip(f"this libvips cannot save {saver}")
    grid = (
        [(geometry, crop) for geometry in GEOMETRIES for crop in CROPS]
        if fmt is None
        else list(zip(GEOMETRIES, CROPS, strict=True))
    )
    for geometry, crop in grid:
        out = render(BLOCK, source=source, geometry=geometry, crop=crop, format=fmt)
        url, width, height, shown_format = out.split()
        content_type, body = fetch(url.replace("&amp;", "&"), accept=BROWSER_ACCEPT)
        image = pyvips.Image.new_from_buffer(body, "")
        case = (source, geometry, crop, fmt)
        assert (image.width, image.height) == (int(width), int(height)), case
        if shown_format != "auto":
            assert content_type == pipeline.CONTENT_TYPES[shown_format], case
        if fmt == "auto":
            assert content_type in ("image/avif", "image/webp"), case


def test_the_exif_orientation_is_honoured(sources: Path) -> None:
    out = render(BLOCK, source=TURNED, geometry="480x640", crop=None, format=None)
    assert out.split()[1:3] == ["480", "640"]


@pytest.mark.parametrize("fmt", ["gif", "webp"])
def test_animations_stay_animated_with_the_frame_size(sources: Path, fmt: str) -> None:
    out = render(BLOCK, source=ANIMATION, geometry="60", crop=None, format=fmt)
    url, width, height, _ = out.split()
    _, body = fetch(url)
    image = pyvips.Image.new_from_buffer(body, "")
    assert image.get("n-pages") == 6
    assert (image.width, image.height) == (int(width), int(height)) == (60, 45)


def test_alpha_survives_in_png_and_webp(sources: Path) -> None:
    for fmt in ("png", "webp"):
        url = render(BLOCK, source=ALPHA, geometry="100", crop=None, format=fmt).split()[0]
        image = pyvips.Image.new_from_buffer(fetch(url)[1], "")
        assert image.hasalpha(), fmt


# -- the block form ---------------------------------------------------------------


def test_block_form_binds_the_thumbnail_only_inside(sources: Path) -> None:
    out = render(
        "{% load oximg %}"
        '{% thumbnail source "200x100" crop="center" as thumb %}'
        '<img src="{{ thumb.url }}" width="{{ thumb.width }}" height="{{ thumb.height }}">'
        "{% endthumbnail %}[{{ thumb }}]",
        source=LANDSCAPE,
    )
    assert out.startswith('<img src="/img/')
    assert 'width="200" height="100">' in out
    assert out.endswith("[]")


def test_block_form_without_empty_renders_nothing_for_no_source(sources: Path) -> None:
    out = render(
        '{% load oximg %}{% thumbnail source "100" as t %}{{ t.url }}{% endthumbnail %}.',
        source="",
    )
    assert out == "."


@pytest.mark.parametrize(
    "source",
    ["", None, FieldFile(instance=None, field=FileField(storage=default_storage), name=None)],
)
def test_empty_source_renders_the_empty_branch(sources: Path, source: Any) -> None:
    assert render(BLOCK, source=source, geometry="100", crop=None, format=None) == "EMPTY"


def test_str_of_the_thumbnail_is_its_url(sources: Path) -> None:
    out = render(
        '{% load oximg %}{% thumbnail src "100" as t %}{{ t }}|{{ t.url }}{% endthumbnail %}',
        src=LANDSCAPE,
    )
    first, second = out.split("|")
    assert first == second
    assert first.startswith("/img/")


def test_arguments_may_be_variables(sources: Path) -> None:
    out = render(
        "{% load oximg %}{% thumbnail src size crop=how quality=q as t %}"
        "{{ t.width }}x{{ t.height }} {{ t.url }}{% endthumbnail %}",
        src=LANDSCAPE,
        size="120x120",
        how="top",
        q=55,
    )
    size, url = out.split()
    assert size == "120x120"
    assert "/q:55/" in url
    assert "/g:no/" in url


def test_a_field_file_in_a_template(sources: Path) -> None:
    image = FieldFile(instance=None, field=FileField(storage=default_storage), name=LANDSCAPE)
    out = render(BLOCK, source=image, geometry="64", crop=None, format="webp")
    url, width, height, fmt = out.split()
    assert (width, height, fmt) == ("64", "48", "webp")
    assert pyvips.Image.new_from_buffer(fetch(url)[1], "").width == 64


# -- the URL-printing forms ------------------------------------------------------------


def test_without_as_the_url_is_printed(sources: Path) -> None:
    out = render('{% load oximg %}<img src="{% thumbnail src "100" %}">', src=LANDSCAPE)
    url = out.removeprefix('<img src="').removesuffix('">')
    assert url.startswith("/img/")
    assert fetch(url)[0] == "image/jpeg"


def test_without_as_and_no_source_nothing_is_printed(sources: Path) -> None:
    assert render('{% load oximg %}[{% thumbnail src "100" %}]', src="") == "[]"


def test_thumbnail_url(sources: Path) -> None:
    out = render(
        '{% load oximg %}{% thumbnail_url src "80x80" crop="center" format="png" %}',
        src=LANDSCAPE,
    )
    content_type, body = fetch(out)
    assert content_type == "image/png"
    image = pyvips.Image.new_from_buffer(body, "")
    assert (image.width, image.height) == (80, 80)
    assert render('{% load oximg %}[{% thumbnail_url src "80" %}]', src=None) == "[]"


def test_the_three_forms_agree(sources: Path) -> None:
    out = render(
        "{% load oximg %}"
        '{% thumbnail src "90" format="webp" as t %}{{ t.url }}{% endthumbnail %} '
        '{% thumbnail src "90" format="webp" %} '
        '{% thumbnail_url src "90" format="webp" %}',
        src=LANDSCAPE,
    )
    first, second, third = out.split()
    assert first == second == third


@pytest.fixture
def odd_prefix(sources: Path, settings: Any) -> str:
    """A legal but HTML-special URL prefix, with the views not in the URLconf."""
    settings.ROOT_URLCONF = "tests.urls_empty"
    settings.OXIMG = {**settings.OXIMG, "URL_PREFIX": "/a&b'c/"}
    return "/a&b'c/"


def test_output_is_html_escaped_in_every_form(odd_prefix: str) -> None:
    escaped = "/a&amp;b&#x27;c/"
    block = render(
        '{% load oximg %}{% thumbnail src "50" as t %}{{ t.url }}{% endthumbnail %}',
        src=LANDSCAPE,
    )
    plain = render('{% load oximg %}{% thumbnail src "50" %}', src=LANDSCAPE)
    url_tag = render('{% load oximg %}{% thumbnail_url src "50" %}', src=LANDSCAPE)
    for out in (block, plain, url_tag):
        assert out.startswith(escaped), out
        assert "'" not in out
    assert block == plain == url_tag


def test_autoescape_off_is_respected(odd_prefix: str) -> None:
    out = render(
        '{% load oximg %}{% autoescape off %}{% thumbnail src "50" %} '
        '{% thumbnail_url src "50" %}{% endautoescape %}',
        src=LANDSCAPE,
    )
    first, second = out.split()
    assert first == second
    assert first.startswith(odd_prefix)


# -- errors ---------------------------------------------------------------------


@pytest.fixture
def raising(settings: Any) -> None:
    """What a project's test settings set: template failures raise."""
    settings.OXIMG = {**settings.OXIMG, "RAISE_TEMPLATE_ERRORS": True}


def failure_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The failures logged: each one WARNING line, without a traceback."""
    records = [r for r in caplog.records if r.name == "django_oximg"]
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in records)
    lines = [r.getMessage() for r in records]
    assert all("\n" not in line for line in lines)
    return lines


@pytest.mark.parametrize(
    ("source", "geometry", "error"),
    [
        (LANDSCAPE, "big", ThumbnailError),
        ("photos/missing.jpg", "100", SourceNotFound),
    ],
)
def test_errors_raise_with_raise_template_errors(
    sources: Path, raising: None, source: str, geometry: str, error: type[Exception]
) -> None:
    for text in (
        BLOCK,
        "{% load oximg %}{% thumbnail source geometry %}",
        "{% load oximg %}{% thumbnail_url source geometry %}",
    ):
        with pytest.raises(error):
            render(text, source=source, geometry=geometry, crop=None, format=None)


@pytest.mark.parametrize(
    ("source", "geometry", "logged"),
    [
        (LANDSCAPE, "big", "ThumbnailError"),
        ("photos/missing.jpg", "100", "SourceNotFound"),
        (LANDSCAPE, "100", "InvalidOptions"),  # an unknown preset, given by a variable below
    ],
)
@pytest.mark.parametrize("debug", [False, True])
def test_errors_render_empty_and_log_one_line(
    sources: Path,
    settings: Any,
    caplog: pytest.LogCaptureFixture,
    source: str,
    geometry: str,
    logged: str,
    debug: bool,
) -> None:
    """Whatever DEBUG says: one missing media file never turns a page into a 500."""
    settings.DEBUG = debug
    preset = "no-such-preset" if logged == "InvalidOptions" else ""
    block = (
        "{% load oximg %}{% thumbnail source geometry preset=preset as t %}{{ t.url }}"
        "{% empty %}EMPTY{% endthumbnail %}"
    )
    with caplog.at_level(logging.WARNING, logger="django_oximg"):
        out = render(block, source=source, geometry=geometry, preset=preset)
        plain = render(
            "{% load oximg %}[{% thumbnail source geometry preset=preset %}]"
            "[{% thumbnail_url source geometry preset=preset %}]",
            source=source,
            geometry=geometry,
            preset=preset,
        )
    assert out == "EMPTY"
    assert plain == "[][]"
    lines = failure_lines(caplog)
    assert len(lines) == 3
    assert all(f"thumbnail of {source!r} failed: {logged}" in line for line in lines)


#: Every tag over one source, each printing something only when it makes a URL.
EVERY_TAG = (
    "{% load oximg %}"
    '{% thumbnail source "200x150" as t %}[{{ t.url }}]{% empty %}EMPTY{% endthumbnail %}'
    '[{% thumbnail_url source "200" %}]'
    '[{% thumbnail_srcset source "200" widths="100,200" %}]'
    '[{% picture source "200" widths="100,200" placeholder=True %}]'
)


def test_a_stored_source_over_the_resolution_limit_renders_the_empty_branch(
    sources: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A 50 MP phone photo stored before the validator existed: no broken images."""
    (sources / "photos" / "phone.png").write_bytes(bombs.flat_grey_png(8160, 6144))
    with caplog.at_level(logging.WARNING, logger="django_oximg"):
        out = render(EVERY_TAG, source="photos/phone.png")
    assert out == "EMPTY[][][]"
    lines = failure_lines(caplog)
    assert lines
    assert all("SourceTooLarge: 8160x6144x1 px exceeds 50000000" in line for line in lines)


def test_the_tags_refuse_exactly_what_the_server_refuses(sources: Path, settings: Any) -> None:
    """At the limit the tags print the URL, and the server renders it; one pixel
    under, the tags take the empty branch and the server answers that URL with 422."""
    block = '{% load oximg %}{% thumbnail source "100" as t %}{{ t.url }}{% endthumbnail %}'
    at_limit = {**settings.OXIMG, "MAX_SRC_RESOLUTION": 640 * 480}
    settings.OXIMG = at_limit
    url = render(block, source=LANDSCAPE)
    assert url
    settings.OXIMG = {**at_limit, "MAX_SRC_RESOLUTION": 640 * 480 - 1}
    assert render(block, source=LANDSCAPE) == ""
    assert Client().get(url).status_code == 422
    settings.OXIMG = at_limit
    assert fetch(url)[0] == "image/jpeg"
    # A URL's own, lower limit is the tags' limit too.
    assert render(BLOCK_WITH_OPTIONS, source=LANDSCAPE, options="msr:0.3") == "EMPTY"
    assert render(BLOCK_WITH_OPTIONS, source=LANDSCAPE, options="msr:0.31") != "EMPTY"


BLOCK_WITH_OPTIONS = (
    '{% load oximg %}{% thumbnail source "100" options=options as t %}{{ t.url }}'
    "{% empty %}EMPTY{% endthumbnail %}"
)


def test_an_undefined_keyword_variable_is_named_in_the_log(
    sources: Path, caplog: pytest.LogCaptureFixture
) -> None:
    block = (
        "{% load oximg %}{% thumbnail source 100 upscale=photo.upscale as t %}"
        "URL{% empty %}EMPTY{% endthumbnail %}"
    )
    with caplog.at_level(logging.WARNING, logger="django_oximg"):
        out = render(block, source=LANDSCAPE)
    assert out == "EMPTY"
    assert [line.split(": ", 2)[-1] for line in failure_lines(caplog)] == [
        "bad upscale photo.upscale (undefined): use True or False"
    ]


def test_an_undefined_geometry_variable_is_named(sources: Path, raising: None) -> None:
    with pytest.raises(ThumbnailError, match="the geometry sizee is empty or undefined"):
        render("{% load oximg %}{% thumbnail source sizee %}", source=LANDSCAPE)


def test_a_storage_that_is_no_source_is_explained(
    sources: Path, raising: None, tmp_path: Path
) -> None:
    elsewhere = FileSystemStorage(location=str(tmp_path / "elsewhere"))
    image = FieldFile(instance=None, field=FileField(storage=elsewhere), name=LANDSCAPE)
    with pytest.raises(ThumbnailError, match=r"not an OXIMG source.*SOURCES"):
        render(BLOCK, source=image, geometry="100", crop=None, format=None)


def test_unexpected_errors_are_never_swallowed(
    sources: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.DEBUG = False

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(tag_functions, "get_thumbnail", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        render(BLOCK, source=LANDSCAPE, geometry="100", crop=None, format=None)


@pytest.mark.parametrize(
    "text",
    [
        "{% thumbnail %}",
        "{% thumbnail src %}",
        "{% thumbnail src as t %}{% endthumbnail %}",
        '{% thumbnail src "100" crop="top" crop="left" %}',
        '{% thumbnail src "100" as %}',
        '{% thumbnail src "100" as 9t %}{% endthumbnail %}',
        # the block form (an {% endthumbnail %} follows) and easy-thumbnails' form mixed
        '{% thumbnail src "1" as t %}{% thumbnail src "2" as u %}{{ u }}{% endthumbnail %}',
        '{% thumbnail src "100" as t %}{% empty %}no end',
        "{% thumbnail_url %}",
        '{% thumbnail_url crop="top" %}',
    ],
)
def test_bad_syntax(text: str) -> None:
    with pytest.raises(TemplateSyntaxError):
        Template("{% load oximg %}" + text)


#: Mistakes written as literals, and the words the compile-time error must contain.
LITERAL_MISTAKES = [
    ('{% thumbnail src "100" padding=3 %}', "bad padding 3"),
    ('{% thumbnail src "100" progressive=True %}', "progressive: JPEGs are written baseline"),
    ('{% thumbnail src "100" colorspace="GRAY" %}', "colorspace"),
    ('{% thumbnail src "100" cropbox="0,0,10,10" %}', "cropbox: cut a region first"),
    ('{% thumbnail src "100" crop="10px 20px" %}', "bad crop '10px 20px': pixel offsets"),
    ('{% thumbnail src "100" crop="scale" %}', "bad crop 'scale'"),
    ('{% thumbnail src "100" crop="sideways" %}', "bad crop 'sideways'"),
    ('{% thumbnail src "big" %}', "bad geometry 'big'"),
    ('{% thumbnail src "100x" %}', "bad geometry '100x'"),
    ("{% thumbnail src 100x100x2 %}", "bad geometry"),
    ('{% thumbnail src "100" quality="high" %}', "bad quality 'high'"),
    ('{% thumbnail src "100" format="bmp" %}', "unknown format 'bmp'"),
    ('{% thumbnail src "100" upscale="maybe" %}', "bad upscale 'maybe'"),
    ('{% thumbnail src "100" background="red" %}', "bad background 'red'"),
    ('{% thumbnail src "100" sizing="pillow" %}', "bad sizing 'pillow'"),
    ('{% thumbnail src "100" preset="nope" %}', "unknown preset 'nope'"),
    ('{% thumbnail src "100" options="zz:1" %}', "bad options 'zz:1'"),
    ("{% thumbnail src 100x100 sharpen %}", "got 'sharpen' (sharpen takes a value: sharpen=...)"),
    ("{% thumbnail src 100x100 bw %}", "expected key=value, got 'bw' (no equivalent)"),
    ('{% thumbnail_url src "100" colour="red" %}', "unknown thumbnail keyword(s): colour"),
    ('{% thumbnail_srcset src "200" crop="sideways" %}', "bad crop 'sideways'"),
    ('{% thumbnail_srcset src "200" widths="nope" %}', "unknown widths 'nope'"),
    ('{% picture src "200" onload="x()" %}', "unknown thumbnail keyword(s): onload"),
    # numbers out of their range, with the server's range named
    ('{% thumbnail src "100" quality=150 %}', "bad quality: not in 0..100: '150'"),
    ('{% thumbnail src "100" blur=-3 %}', "bad blur: not in 0.0..100.0: '-3'"),
    ('{% thumbnail src "100" sharpen="101" %}', "bad sharpen: not in 0.0..100.0"),
    ('{% thumbnail src "100" watermark=2 %}', "bad watermark: not in 0.0..1.0"),
    ('{% thumbnail_url src "100" pixelate=-1 %}', "bad pixelate: not in 0..100000"),
    ('{% thumbnail_srcset src "200" quality=101 %}', "bad quality: not in 0..100"),
    ('{% picture src "200" blur=-3 %}', "bad blur: not in 0.0..100.0"),
]


@pytest.mark.parametrize(("text", "words"), LITERAL_MISTAKES)
def test_literal_mistakes_fail_when_the_template_is_compiled(text: str, words: str) -> None:
    with pytest.raises(TemplateSyntaxError) as raised:
        Template("{% load oximg %}" + text)
    assert words in str(raised.value)
    assert str(raised.value).startswith(text.split()[1])  # the tag's name


def test_variables_are_checked_when_the_tag_renders(sources: Path, raising: None) -> None:
    page = Template('{% load oximg %}{% thumbnail src "100" crop=how %}')  # compiles
    with pytest.raises(ThumbnailError, match="bad crop 'noon'"):
        page.render(Context({"src": LANDSCAPE, "how": "noon"}))


def test_easy_thumbnails_as_form_sets_a_variable(sources: Path) -> None:
    """Without an {% endthumbnail %} in the template, ``as`` sets the variable, as there."""
    out = render(
        "{% load oximg %}{% for s in names %}{% thumbnail s 80x60 crop as t %}"
        "{{ t.width }}x{{ t.height }}:{{ t.url|slice:':5' }} {% endfor %}",
        names=[LANDSCAPE, "photos/missing.jpg", ""],
    )
    assert out == "80x60:/img/ x: x: "


def test_a_misleading_unquoted_geometry_is_a_size(sources: Path) -> None:
    """``200x0`` unquoted was a variable lookup that gave '': now it is the size."""
    out = render(
        "{% load oximg %}{% thumbnail src 200x0 as t %}{{ t.width }}x{{ t.height }}"
        "{% endthumbnail %} {% thumbnail src 80x80 crop as t %}{{ t.size }}{% endthumbnail %}",
        src=LANDSCAPE,
    )
    assert out == "200x150 [80, 80]"


def test_a_size_variable_may_hold_easy_thumbnails_tuple(sources: Path) -> None:
    out = render(
        "{% load oximg %}{% for size in sizes %}{% thumbnail src size as t %}{{ t.size }}"
        "{% endthumbnail %}{% endfor %}",
        src=LANDSCAPE,
        sizes=[(100, 100), (200, 0), [0, 30]],
    )
    assert out == "[100, 75][200, 150][40, 30]"


@pytest.mark.parametrize("crop", ["True", '"true"', "1", '"center"'])
def test_crop_true_is_centre(sources: Path, crop: str) -> None:
    out = render(f'{{% load oximg %}}{{% thumbnail_url src "60x60" crop={crop} %}}', src=LANDSCAPE)
    centre = render('{% load oximg %}{% thumbnail_url src "60x60" crop="center" %}', src=LANDSCAPE)
    assert out == centre


@pytest.mark.parametrize("crop", ["False", '"noop"', '""', "None"])
def test_no_crop_spellings_fit(sources: Path, crop: str) -> None:
    out = render(f'{{% load oximg %}}{{% thumbnail_url src "60x60" crop={crop} %}}', src=LANDSCAPE)
    assert out == render('{% load oximg %}{% thumbnail_url src "60x60" %}', src=LANDSCAPE)


# -- cost per render ------------------------------------------------------------


def test_a_second_render_reads_no_source(sources: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first render reads each source's header once, never a whole file."""
    store = runtime.get_source_resolver().stores[""]
    read_header = store.read_header
    reads: list[str] = []

    def counting_read_header(name: str, limit: int) -> bytes:
        reads.append(name)
        return read_header(name, limit)

    monkeypatch.setattr(store, "read_header", counting_read_header)
    monkeypatch.setattr(store, "read", lambda *args: pytest.fail("read a whole source"))
    page = Template(
        "{% load oximg %}{% for s in names %}"
        '{% thumbnail s "100x100" crop="center" as t %}{{ t.url }} {% endthumbnail %}'
        '{% thumbnail_url s "50" %} {% endfor %}'
    )
    names = [LANDSCAPE, ALPHA, ANIMATION, TURNED]
    first = page.render(Context({"names": names}))
    assert sorted(reads) == sorted(names)
    second = page.render(Context({"names": names}))
    assert second == first
    assert len(reads) == len(names)


# -- sorl-thumbnail's and easy-thumbnails' filters and forms ---------------------------------


@pytest.fixture
def presets(settings: Any) -> None:
    settings.OXIMG = {**settings.OXIMG, "PRESETS": {"avatar": "rs:fill:50:50/g:ce"}}


def test_is_portrait_of_sources_and_thumbnails(sources: Path) -> None:
    out = render(
        "{% load oximg %}{{ a|is_portrait }} {{ b|is_portrait }} {{ c|is_portrait }}"
        '{% thumbnail a "100x200" crop="center" as t %} {{ t|is_portrait }}'
        " {{ t.is_portrait }}{% endthumbnail %}",
        a=LANDSCAPE,
        b=TURNED,  # stored landscape, shown portrait
        c="",
    )
    assert out == "False True False True True"


def test_margin_centres_the_thumbnail_in_the_box(sources: Path) -> None:
    out = render(
        '{% load oximg %}{% thumbnail src "100" as t %}{{ t|margin:"120x120" }}{% endthumbnail %}'
        '|{{ src|margin:"640x500" }}|{{ none|margin:"10x10" }}',
        src=LANDSCAPE,
        none="",
    )
    assert out == "22px 10px 23px 10px|10px 0px 10px 0px|auto"


def test_resolution_of_a_url_and_of_a_thumbnail(sources: Path) -> None:
    out = render(
        '{% load oximg %}{% thumbnail src "100x80" crop="center" as t %}'
        "{{ t.url|resolution:'2x' }} {{ t|resolution:'2x' }} {{ t.url }}{% endthumbnail %}",
        src=LANDSCAPE,
    )
    from_url, from_thumbnail, plain = (url.replace("&amp;", "&") for url in out.split())
    assert from_url == from_thumbnail != plain
    image = pyvips.Image.new_from_buffer(fetch(from_url)[1], "")
    assert (image.width, image.height) == (200, 160)


def test_resolution_gives_back_what_it_cannot_double(
    sources: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="django_oximg"):
        out = render("{% load oximg %}{{ url|resolution:'2x' }}", url="/static/logo.png")
    assert out == "/static/logo.png"
    assert len(failure_lines(caplog)) == 1


def test_the_thumbnail_url_filter_takes_a_preset(
    sources: Path, presets: None, caplog: pytest.LogCaptureFixture
) -> None:
    out = render(
        "{% load oximg %}{{ src|thumbnail_url:'avatar' }} "
        '{% thumbnail_url src preset="avatar" %} {% thumbnail_url src "avatar" %} '
        "[{{ src|thumbnail_url:'nope' }}]",
        src=LANDSCAPE,
    )
    first, second, third, missing = out.split()
    assert first == second == third
    assert pyvips.Image.new_from_buffer(fetch(first)[1], "").width == 50
    assert missing == "[]"
    assert "InvalidOptions" in failure_lines(caplog)[0]


def test_the_block_tag_takes_a_preset_without_geometry(sources: Path, presets: None) -> None:
    out = render(
        '{% load oximg %}{% thumbnail src preset="avatar" as t %}{{ t.size }}{% endthumbnail %}'
        '{% thumbnail src "avatar" as t %}{{ t.size }}{% endthumbnail %}',
        src=LANDSCAPE,
    )
    assert out == "[50, 50][50, 50]"


def test_the_data_uri_filter_inlines_the_image(sources: Path) -> None:
    out = render(
        '{% load oximg %}{% thumbnail src "24x24" crop="center" as t %}{{ t|data_uri }}'
        "{% endthumbnail %}[{{ none|data_uri }}]",
        src=LANDSCAPE,
        none="",
    )
    uri, empty = out.split("[")
    assert uri.startswith("data:image/jpeg;base64,")
    image = pyvips.Image.new_from_buffer(base64.b64decode(uri.partition(",")[2]), "")
    assert (image.width, image.height) == (24, 24)
    assert empty == "]"


# -- import weight -----------------------------------------------------------------

#: What a page render must not load: libvips and what the pipeline brings.
HEAVY_MODULES = ("pyvips", "numpy", "simplejpeg", "PIL")

#: A page of every plain tag over every kind of source (``{% picture %}``
#: alone asks libvips which formats it can encode).
PAGE = (
    "{% load oximg %}{% for s in names %}"
    '{% thumbnail s "100x100" crop="center" as t %}{{ t.url }} {{ t.width }}x{{ t.height }}'
    "{% endthumbnail %}\n"
    '{% thumbnail_url s "50" %}\n{% thumbnail_srcset s "200x150" widths="100,200" %}\n'
    "{% endfor %}"
)

#: Run in a new process: Django set up on a file-based cache, the tag library
#: imported, the page rendered; what was loaded, and the page, as JSON.
PAGE_SCRIPT = """
import json, sys
import django
from django.conf import settings
media, cache, phase, key, salt, page, names = sys.argv[1:8]
settings.configure(
    SECRET_KEY="tests-only-not-secret", USE_TZ=True, INSTALLED_APPS=["django_oximg"],
    ROOT_URLCONF="tests.urls", MEDIA_ROOT=media,
    CACHES={"default": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                        "LOCATION": cache}},
    STORAGES={"default": {"BACKEND": "django.core.files.storage.FileSystemStorage"}},
    TEMPLATES=[{"BACKEND": "django.template.backends.django.DjangoTemplates"}],
    OXIMG={"KEY": key, "SALT": salt},
)
django.setup()
heavy = ("pyvips", "numpy", "simplejpeg", "PIL")
import django_oximg.templatetags.oximg
after_import = [name for name in heavy if name in sys.modules]
if phase == "warm":
    from django_oximg.core.stores.disk import FileSystemSourceStore
    def refuse(*args):
        raise AssertionError("read a source although its metadata was cached")
    FileSystemSourceStore.read = FileSystemSourceStore.read_header = refuse
from django.template import engines
html = engines["django"].from_string(page).render({"names": names.split(",")})
after_render = [name for name in heavy if name in sys.modules]
print(json.dumps({"import": after_import, "render": after_render, "page": html}))
"""


def render_in_new_process(media: Path, cache_dir: Path, phase: str) -> dict[str, Any]:
    import json
    import subprocess
    import sys

    from django.conf import settings

    key, salt = settings.OXIMG["KEY"], settings.OXIMG["SALT"]
    names = ",".join([LANDSCAPE, ALPHA, ANIMATION, TURNED, "photos/photo.webp", "photos/p.avif"])
    arguments = [str(media), str(cache_dir), phase, key, salt, PAGE, names]
    environment = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    result = subprocess.run(
        [sys.executable, "-c", PAGE_SCRIPT, *arguments],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
        env=environment,
    )
    assert result.returncode == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def test_a_page_render_loads_no_image_library(
    sources: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Importing the tags and rendering a page never loads libvips, numpy or Pillow.

    First with the metadata cache empty (each source's header is read in
    pure Python), then in another process with it warm (no source is read).
    The page is the one this process renders with libvips reading every
    header.
    """
    (sources / "photos" / "photo.webp").write_bytes(images.photo(300, 200).webpsave_buffer())
    turned = images.photo(300, 200).copy()
    turned.set_type(pyvips.GValue.gint_type, "orientation", 6)
    (sources / "photos" / "p.avif").write_bytes(turned.heifsave_buffer(compression="av1"))
    cold = render_in_new_process(sources, tmp_path / "cache", "cold")
    warm = render_in_new_process(sources, tmp_path / "cache", "warm")
    for run in (cold, warm):
        assert run["import"] == []
        assert run["render"] == []
    assert warm["page"] == cold["page"]

    def probed(store: Any, name: str) -> headers.Header:
        info = pipeline.probe(store.read(name, 10**8))
        return headers.Header(
            info.format, info.width, info.height, info.orientation, info.has_alpha
        )

    monkeypatch.setattr(source_metadata, "source_header", probed)
    names = [LANDSCAPE, ALPHA, ANIMATION, TURNED, "photos/photo.webp", "photos/p.avif"]
    assert cold["page"] == render(PAGE, names=names)


# -- a site's own option (OXIMG["EXTENSIONS"]) ------------------------------------------


@pytest.fixture
def sepia_site(media: Path, settings: Any) -> Path:
    settings.OXIMG = {**settings.OXIMG, "EXTENSIONS": ["tests.site_extensions.SEPIA"]}
    return media


def test_a_sites_option_is_a_keyword_of_the_tag(sepia_site: Path) -> None:
    tag = '{% load oximg %}{% thumbnail source "80x60" sepia=0.8 as t %}'
    url = render(tag + "{{ t.url }}{% endthumbnail %}", source=LANDSCAPE)
    assert "/sep:0.8/" in url
    _, body = fetch(url)
    image = pyvips.Image.new_from_buffer(body, "")
    assert image.width == 80
    assert image[0].avg() > image[1].avg() > image[2].avg()  # the sepia tone
    plain = render(
        '{% load oximg %}{% thumbnail source "80x60" as t %}{{ t.url }}{% endthumbnail %}',
        source=LANDSCAPE,
    )
    assert "sep:" not in plain


def test_a_bad_literal_value_of_a_sites_option_fails_the_template(sepia_site: Path) -> None:
    with pytest.raises(TemplateSyntaxError, match=r"bad sepia 2: not in 0\.\.1"):
        Template('{% load oximg %}{% thumbnail source "80x60" sepia=2 %}')


def test_a_bad_value_of_a_sites_option_from_a_variable_renders_the_empty_branch(
    sepia_site: Path,
) -> None:
    text = (
        '{% load oximg %}{% thumbnail source "80x60" sepia=amount as t %}URL'
        "{% empty %}EMPTY{% endthumbnail %}"
    )
    assert render(text, source=LANDSCAPE, amount="lots") == "EMPTY"
    assert render(text, source=LANDSCAPE, amount="0.5") == "URL"
