"""{% thumbnail_srcset %} and {% picture %}: candidates, shapes, formats, markup, cost.

The promise checked throughout: every ``url Nw`` candidate is served exactly
N pixels wide, in the shape of the geometry, in the format its ``<source>``
announces; the ``<img>`` declares the size of its ``src``.
"""

from __future__ import annotations

import logging
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import pyvips
from django.core.exceptions import ImproperlyConfigured
from django.template import Context, Template
from django.test import Client

from django_oximg import conf, responsive, runtime
from django_oximg.core import pipeline
from django_oximg.responsive import get_picture, get_srcset, picture_html, widths_of
from django_oximg.thumbnails import ThumbnailError
from tests.test_templatetags import empty_cache, sources  # noqa: F401 (fixtures)

LANDSCAPE = "photos/landscape.jpg"  # 640x480
ALPHA = "photos/alpha.png"  # 320x240 with a transparent surround
ANIMATION = "photos/anim.gif"  # 120x90, 6 frames
TURNED = "photos/turned.jpg"  # stored 640x480 with EXIF orientation 6: shown 480x640

BROWSER_ACCEPT = "image/avif,image/webp,image/apng,image/*,*/*;q=0.8"


@pytest.fixture
def avif() -> None:
    if not pipeline.saver_available("avif"):
        pytest.skip("this libvips cannot save avif")


def render(text: str, **context: Any) -> str:
    return Template("{% load oximg %}" + text).render(Context(context))


def fetch(url: str, **load: Any) -> tuple[str, pyvips.Image]:
    """GET ``url`` as a browser would; its content type and decoded image."""
    response = Client().get(url.replace("&amp;", "&"), HTTP_ACCEPT=BROWSER_ACCEPT)
    try:
        assert response.status_code == 200, (url, response.status_code)
        body = b"".join(response.streaming_content) if response.streaming else response.content
    finally:
        response.close()
    return response.headers["Content-Type"], pyvips.Image.new_from_buffer(body, "", **load)


def parse_srcset(value: str) -> list[tuple[str, int]]:
    """``url 320w, url 640w`` -> [(url, 320), ...]."""
    candidates = []
    for part in value.split(", "):
        url, descriptor = part.split(" ")
        assert descriptor.endswith("w"), part
        candidates.append((url, int(descriptor[:-1])))
    return candidates


def served_sizes(srcset: str) -> list[tuple[int, int]]:
    """Fetch every candidate; check it is as wide as its descriptor; return the sizes."""
    sizes = []
    for url, width in parse_srcset(srcset):
        _, image = fetch(url)
        assert image.width == width, (url, image.width, width)
        sizes.append((image.width, image.height))
    return sizes


# -- candidates ------------------------------------------------------------------


def test_crop_candidates_keep_the_shape_and_stop_at_the_source(sources: Path) -> None:
    srcset = get_srcset(LANDSCAPE, "400x300", widths="200,400,800", crop="center")
    assert (srcset.width, srcset.height) == (400, 300)
    assert [c.width for c in srcset.candidates] == [200, 400, 640]
    assert served_sizes(str(srcset)) == [(200, 150), (400, 300), (640, 480)]
    assert srcset.url == srcset.candidates[1].url


def test_a_crop_larger_than_the_source_is_shrunk_to_keep_its_shape(sources: Path) -> None:
    """800x800 of a 640x480 source without upscale: a 480x480 square, not 640x480."""
    srcset = get_srcset(LANDSCAPE, "800x800", widths=[400, 800], crop="center")
    assert (srcset.width, srcset.height) == (480, 480)
    assert served_sizes(str(srcset)) == [(400, 400), (480, 480)]


def test_a_turned_source_is_measured_upright(sources: Path) -> None:
    srcset = get_srcset(TURNED, "300x300", widths="300,600", crop="center")
    assert served_sizes(str(srcset)) == [(300, 300), (480, 480)]


def test_fit_candidates_keep_the_source_shape(sources: Path) -> None:
    """A 480x640 (upright) source fitted into boxes of 4:3 shape."""
    srcset = get_srcset(TURNED, "400x300", widths="320,640,960")
    assert (srcset.width, srcset.height) == (225, 300)
    sizes = served_sizes(str(srcset))
    assert sizes == [(180, 240), (225, 300), (360, 480), (480, 640)]


def test_widths_are_never_above_the_source_unless_upscale(sources: Path) -> None:
    plain = get_srcset(LANDSCAPE, "400", widths="320,640,960,1280")
    assert [c.width for c in plain.candidates] == [320, 400, 640]
    enlarged = get_srcset(LANDSCAPE, "400", widths="320,640,960,1280", upscale=True)
    assert [c.width for c in enlarged.candidates] == [320, 400, 640, 960, 1280]
    assert served_sizes(str(enlarged))[-1] == (1280, 960)


def test_height_only_geometry(sources: Path) -> None:
    srcset = get_srcset(LANDSCAPE, "x150", widths="100,300")
    assert (srcset.width, srcset.height) == (200, 150)
    assert served_sizes(str(srcset)) == [(100, 75), (200, 150), (300, 225)]


def test_format_and_other_keywords_apply_to_every_candidate(sources: Path) -> None:
    srcset = get_srcset(LANDSCAPE, "200x200", widths="100,200", crop="smart", format="webp")
    for url, _ in parse_srcset(str(srcset)):
        assert "/g:sm/" in url
        content_type, _ = fetch(url)
        assert content_type == "image/webp"


# -- widths ----------------------------------------------------------------------


def test_widths_default_and_named_lists(settings: Any) -> None:
    assert widths_of(None) == (320, 640, 960, 1280, 1920)
    settings.OXIMG = {**settings.OXIMG, "SRCSET_WIDTHS": {"cards": [480, 240, 480]}}
    assert widths_of("cards") == (240, 480)
    assert widths_of("default") == (320, 640, 960, 1280, 1920)  # merged over the default
    assert widths_of(" 640, 320 ") == (320, 640)
    assert widths_of([3, 1, 2]) == (1, 2, 3)


@pytest.mark.parametrize("widths", ["nope", "320,abc", "0,320", [], ["x"], "-5"])
def test_bad_widths_are_named(widths: Any) -> None:
    with pytest.raises(ThumbnailError, match="widths"):
        widths_of(widths)


@pytest.mark.parametrize(
    "value",
    [
        [320, 640],
        {"cards": []},
        {"cards": [0]},
        {"cards": [True]},
        {"cards": "320"},
        {"9lives": [320]},
        {"has space": [320]},
    ],
)
def test_bad_srcset_widths_settings_fail_at_start(value: Any) -> None:
    with pytest.raises(ImproperlyConfigured, match="SRCSET_WIDTHS"):
        conf.build_settings({"SRCSET_WIDTHS": value})


def test_dpr_is_refused_with_w_descriptors(sources: Path) -> None:
    with pytest.raises(ThumbnailError, match="dpr"):
        get_srcset(LANDSCAPE, "200", dpr=2)


def test_a_preset_only_geometry_is_refused(sources: Path, settings: Any) -> None:
    settings.OXIMG = {**settings.OXIMG, "PRESETS": {"card": "rs:fill:200:100"}}
    with pytest.raises(ThumbnailError, match="geometry"):
        get_srcset(LANDSCAPE, "", preset="card")


# -- cost ------------------------------------------------------------------------


def test_one_metadata_read_per_picture_and_no_processing(
    sources: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    header_reads: list[int] = []
    probes: list[int] = []
    metadata, probe = responsive.source_metadata, pipeline.probe
    store = runtime.get_source_resolver().stores[""]
    read_header = store.read_header

    def counting_metadata(source: str) -> Any:
        reads.append(source)
        return metadata(source)

    def counting_read_header(name: str, limit: int) -> bytes:
        header_reads.append(limit)
        return read_header(name, limit)

    monkeypatch.setattr(responsive, "source_metadata", counting_metadata)
    monkeypatch.setattr(store, "read_header", counting_read_header)
    monkeypatch.setattr(pipeline, "probe", lambda data: probes.append(len(data)) or probe(data))
    renders = pipeline.render
    monkeypatch.setattr(pipeline, "render", lambda *a, **k: pytest.fail("rendered"))
    text = '{% picture src "400x300" widths="100,200,300,400" placeholder=True %}'
    first = render(text, src=LANDSCAPE)
    assert reads == [LANDSCAPE]
    assert len(header_reads) == 1
    assert render(text, src=LANDSCAPE) == first
    assert len(reads) == 2
    assert len(header_reads) == 1  # the header came from the metadata cache
    assert probes == []  # read from the first kilobytes, without libvips
    monkeypatch.setattr(pipeline, "render", renders)


# -- {% picture %} ---------------------------------------------------------------


class Markup(HTMLParser):
    """The elements of a rendered <picture>, as (tag, attributes) in order."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {name: value or "" for name, value in attrs}))

    def tags(self) -> list[str]:
        return [tag for tag, _ in self.elements]

    def first(self, tag: str) -> dict[str, str]:
        return next(attrs for name, attrs in self.elements if name == tag)

    def sources(self) -> list[dict[str, str]]:
        return [attrs for name, attrs in self.elements if name == "source"]


def test_picture_offers_avif_webp_and_a_sized_fallback(sources: Path, avif: None) -> None:
    out = render(
        '{% picture src "400x300" widths="200,400,800" crop="center" alt="A gradient" '
        'class="hero" loading="eager" %}',
        src=LANDSCAPE,
    )
    assert out.startswith("<picture>") and out.endswith("</picture>")
    page = Markup(out)
    assert page.tags() == ["picture", "source", "source", "img"]
    assert [s["type"] for s in page.sources()] == ["image/avif", "image/webp"]
    img = page.first("img")
    assert (img["width"], img["height"]) == ("400", "300")
    assert img["alt"] == "A gradient"
    assert img["class"] == "hero"
    assert img["loading"] == "eager"
    assert img["decoding"] == "async"
    assert img["sizes"] == "(max-width: 400px) 100vw, 400px"
    content_type, image = fetch(img["src"])
    assert (content_type, image.width, image.height) == ("image/jpeg", 400, 300)
    for element in [*page.sources(), img]:
        assert element["sizes"] == img["sizes"]
        expected = element.get("type", "image/jpeg")
        for url, width in parse_srcset(element["srcset"]):
            content_type, image = fetch(url)
            assert content_type == expected, url
            assert (image.width, image.height) == (width, width * 3 // 4), url
        assert [w for _, w in parse_srcset(element["srcset"])] == [200, 400, 640]


def test_picture_defaults(sources: Path) -> None:
    img = Markup(render('{% picture src "300" %}', src=LANDSCAPE)).first("img")
    assert img["alt"] == ""
    assert img["loading"] == "lazy"
    assert "style" not in img
    assert [w for _, w in parse_srcset(img["srcset"])] == [300, 320, 640]


def test_the_fallback_keeps_png_and_gif_and_a_gif_gets_no_avif(sources: Path, avif: None) -> None:
    png = Markup(render('{% picture src "100" widths="100" %}', src=ALPHA))
    assert [s["type"] for s in png.sources()] == ["image/avif", "image/webp"]
    assert fetch(png.first("img")["src"])[0] == "image/png"
    gif = Markup(render('{% picture src "60" widths="60" %}', src=ANIMATION))
    assert [s["type"] for s in gif.sources()] == ["image/webp"]
    content_type, _ = fetch(gif.first("img")["src"])
    assert content_type == "image/gif"
    _, frames = fetch(parse_srcset(gif.sources()[0]["srcset"])[0][0], n=-1)
    assert frames.get("n-pages") == 6


def test_formats_and_a_fallback_format(sources: Path) -> None:
    page = Markup(render('{% picture src "100" format="webp" formats="webp" %}', src=LANDSCAPE))
    assert page.sources() == []
    assert fetch(page.first("img")["src"])[0] == "image/webp"


def test_a_format_this_libvips_cannot_save_is_not_offered(
    sources: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline, "saver_available", lambda fmt: fmt != "avif")
    page = Markup(render('{% picture src "100" %}', src=LANDSCAPE))
    assert [s["type"] for s in page.sources()] == ["image/webp"]


def test_placeholder_is_a_tiny_blurred_webp_behind_the_image(sources: Path) -> None:
    out = render(
        '{% picture src "400x200" crop="center" placeholder=True style="color: red" %}',
        src=LANDSCAPE,
    )
    style = Markup(out).first("img")["style"]
    assert style.startswith('background-image:url("/img/')
    assert style.endswith(";background-size:cover;background-position:center;color: red")
    url = style.split('"')[1]
    assert "/bl:1/" in url and "/q:30/" in url
    content_type, image = fetch(url)
    assert (content_type, image.width, image.height) == ("image/webp", 16, 8)


def test_no_placeholder_behind_an_image_with_alpha_unless_a_background_flattens_it(
    sources: Path,
) -> None:
    """It would show through the transparent surround for good: a blurred halo."""
    img = Markup(render('{% picture src "200" placeholder=True %}', src=ALPHA)).first("img")
    assert "style" not in img
    styled = render('{% picture src "200" placeholder=True style="color: red" %}', src=ALPHA)
    assert Markup(styled).first("img")["style"] == "color: red"

    out = render('{% picture src "200" placeholder=True background="336699" %}', src=ALPHA)
    url = Markup(out).first("img")["style"].split('"')[1]
    _, image = fetch(url)
    assert not image.hasalpha()  # opaque, as the image in front of it is


def test_everything_is_escaped(sources: Path) -> None:
    hostile = '"><script>alert(1)</script>'
    out = render(
        "{% picture src '200' alt=words class=words title=words sizes=words %}",
        src=LANDSCAPE,
        words=hostile,
    )
    assert "<script>" not in out
    assert out.count("&quot;&gt;&lt;script&gt;") == 6  # alt, class, title, three sizes
    img = Markup(out).first("img")
    assert img["alt"] == img["class"] == img["sizes"] == hostile


def test_escaped_with_an_html_special_url_prefix(sources: Path, settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.urls_empty"
    settings.OXIMG = {**settings.OXIMG, "URL_PREFIX": "/a&b'c/"}
    picture = render("{% picture src '200' placeholder=True %}", src=LANDSCAPE)
    srcset = render("{% thumbnail_srcset src '200' %}", src=LANDSCAPE)
    for out in (picture, srcset):
        assert "'" not in out
        assert "/a&amp;b&#x27;c/" in out
    img = Markup(picture).first("img")
    assert img["src"].startswith("/a&b'c/")
    assert "/a&b'c/" in img["style"]


# -- {% thumbnail_srcset %} --------------------------------------------------------


def test_srcset_tag_prints_the_attribute_and_binds_the_object(sources: Path) -> None:
    printed = render(
        '{% thumbnail_srcset src "200x100" widths="100,200" crop="center" %}', src=LANDSCAPE
    )
    bound = render(
        '{% thumbnail_srcset src "200x100" widths="100,200" crop="center" as s %}'
        '<img src="{{ s.url }}" srcset="{{ s }}" width="{{ s.width }}" height="{{ s.height }}">',
        src=LANDSCAPE,
    )
    img = Markup(bound).first("img")
    assert img["srcset"] == printed.replace("&amp;", "&")
    assert (img["width"], img["height"]) == ("200", "100")
    assert served_sizes(img["srcset"]) == [(100, 50), (200, 100)]


def test_srcset_matches_the_python_api(sources: Path) -> None:
    printed = render('{% thumbnail_srcset src "200" widths="100,200" %}', src=LANDSCAPE)
    assert printed == str(get_srcset(LANDSCAPE, "200", widths="100,200"))


# -- failures -------------------------------------------------------------------


@pytest.mark.parametrize("source", ["", None])
def test_no_source_renders_nothing(source: Any) -> None:
    assert (
        render('[{% picture src "200" %}][{% thumbnail_srcset src "200" %}]', src=source) == "[][]"
    )


#: Failures only a render can see: values from variables, and what depends on the source.
FAILING = [
    ('{% picture src "200" format="auto" %}', {}),
    ('{% picture src "200" placeholder="maybe" %}', {}),
    ("{% picture src size %}", {"size": "big"}),
    ('{% picture src "200" widths=widths %}', {"widths": "nope"}),
    ("{% thumbnail_srcset src size %}", {"size": "big"}),
    ('{% thumbnail_srcset src "200" crop=how %}', {"how": "sideways"}),
]


@pytest.mark.parametrize(("text", "context"), FAILING)
def test_failures_raise_with_raise_template_errors(
    sources: Path, settings: Any, text: str, context: dict[str, Any]
) -> None:
    settings.OXIMG = {**settings.OXIMG, "RAISE_TEMPLATE_ERRORS": True}
    with pytest.raises(ThumbnailError):
        render(text, src=LANDSCAPE, **context)


@pytest.mark.parametrize(("text", "context"), FAILING)
def test_failures_render_nothing_and_log_one_line(
    sources: Path, caplog: pytest.LogCaptureFixture, text: str, context: dict[str, Any]
) -> None:
    with caplog.at_level(logging.WARNING, logger="django_oximg"):
        assert render(f"[{text}]", src=LANDSCAPE, **context) == "[]"
    (record,) = [r for r in caplog.records if r.name == "django_oximg"]
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert f"thumbnail of {LANDSCAPE!r} failed: ThumbnailError" in record.getMessage()


def test_a_missing_source_is_logged_too(sources: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="django_oximg"):
        assert render('[{% picture src "200" %}]', src="photos/missing.jpg") == "[]"
    assert [r.getMessage().split(": ")[1] for r in caplog.records] == ["SourceNotFound"]


def test_picture_html_from_python(sources: Path) -> None:
    picture = get_picture(LANDSCAPE, "200", widths=[100], formats=())
    out = picture_html(picture, attrs={"alt": "x", "title": None})
    assert Markup(out).tags() == ["picture", "img"]
    assert "title" not in out
