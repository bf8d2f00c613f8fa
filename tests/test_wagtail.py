"""Wagtail's ``{% image %}`` through django-oximg (django_oximg/contrib/wagtail/).

A real Wagtail site (tests/wagtail_settings.py, tests/wagtail_site/): its
apps migrated into the test database, an image uploaded from a drawn JPEG
with a focal point, a page rendered by Django's test client, every
thumbnail URL fetched through the real view. The sizes are compared with
Wagtail's own renditions of the same image and spec, made in the same run
by ``image.get_rendition``, and the pixels with theirs. The site's image
model (``SiteImage``, ``WAGTAILIMAGES_IMAGE_MODEL``) has
``OximgRenditionsMixin``: a StreamField page, Wagtail's own tags, the pages
API and the serve view ask it for renditions and get django-oximg URLs.

Wagtail's apps bring models and migrations the rest of the suite must not
have, so under tests/settings.py this module only runs itself in a pytest
of its own with ``--ds tests.wagtail_settings`` (:func:`test_the_wagtail_site`),
whose test database is migrated with Wagtail's apps from the start; there
the other tests run and the driver is skipped. A second settings module
in one process would need INSTALLED_APPS swapped under a migrated
database, which Django's app registry and migrations do not support well.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import re
from html import escape, unescape
from pathlib import Path
from typing import Any

import pytest
import pyvips
from django.conf import settings
from django.template import Context, Engine, Template, TemplateSyntaxError

from django_oximg.arguments import ThumbnailError
from tests.services import own_pytest
from tests.test_pipeline import flat, photo

REPO = Path(__file__).resolve().parent.parent

#: Whether this process runs the Wagtail site's settings.
WAGTAIL_SITE = settings.SETTINGS_MODULE == "tests.wagtail_settings"

site_only = pytest.mark.skipif(not WAGTAIL_SITE, reason="runs in test_the_wagtail_site's pytest")

# Wagtail's rendition writer leaves a SpooledTemporaryFile for the garbage
# collector to close, which pytest reports as an unraisable ResourceWarning.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

#: Every filter-spec family Wagtail ships, with and without the focal point.
SPECS = [
    "original",
    "fill-200x200",
    "fill-200x200-c50",
    "fill-300x100-c100",
    "fill-160x90-c0",
    "fill-2000x1000",  # larger than the source: Wagtail crops to the ratio, no upscale
    "width-400",
    "width-2000",
    "height-250",
    "max-500x500",
    "max-300x900",
    "min-500x500",
    "min-100x700",
    "scale-50",
    "scale-150",
    "fill-400x400|width-100",
    "width-300|format-webp",
    "fill-120x120|format-png",
    "fill-200x200|jpegquality-40",
    "max-200x200|format-webp|webpquality-50",
]


def test_the_wagtail_site() -> None:
    """This module's tests, in a pytest with the Wagtail site's settings."""
    if WAGTAIL_SITE:
        pytest.skip("this is the Wagtail site's run")
    if importlib.util.find_spec("wagtail") is None:
        pytest.skip("wagtail is not installed")
    result = own_pytest(__file__, "tests.wagtail_settings")
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-4000:]
    assert " passed" in result.stdout and " failed" not in result.stdout


# -- the site ----------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _empty_caches() -> None:
    """Wagtail keeps renditions, and django-oximg source metadata, in the default cache:
    each test's image gets the first ids again, in a media root of its own."""
    from django.core.cache import caches

    caches["default"].clear()


@functools.cache
def drawn_jpeg(width: int, height: int, orientation: int = 1) -> bytes:
    image = photo(width, height, seed=3).copy()
    if orientation != 1:
        image.set_type(pyvips.GValue.gint_type, "orientation", orientation)
    return bytes(image.jpegsave_buffer(Q=92))


def upload(name: str, data: bytes, **fields: Any) -> Any:
    """A Wagtail image saved from ``data``, as the admin's upload saves one."""
    from django.core.files.images import ImageFile
    from wagtail.images.models import Image

    return Image.objects.create(title=name, file=ImageFile(io.BytesIO(data), name=name), **fields)


@pytest.fixture
def photo_image(db: None, media: Path) -> Any:
    """1200x900, the focal point a 150x120 box around (900, 220)."""
    return upload(
        "photo.jpg",
        drawn_jpeg(1200, 900),
        focal_point_x=900,
        focal_point_y=220,
        focal_point_width=150,
        focal_point_height=120,
    )


@pytest.fixture
def plain_image(db: None, media: Path) -> Any:
    """No focal point, stored on its side (EXIF orientation 6: shown 640x1000)."""
    return upload("turned.jpg", drawn_jpeg(1000, 640, orientation=6))


@pytest.fixture
def photo_page(photo_image: Any) -> Any:
    """A PhotoPage at the site's root, showing ``photo_image``."""
    from wagtail.models import Page, Site

    from tests.wagtail_site.models import PhotoPage

    root = Page.get_first_root_node()
    page = root.add_child(instance=PhotoPage(title="Photos", slug="photos", photo=photo_image))
    Site.objects.update(root_page=page)
    return page


def fetch(client: Any, url: str) -> pyvips.Image:
    """``url`` through the real view: 200, decoded."""
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    body = b"".join(response.streaming_content) if response.streaming else response.content
    response.close()
    return pyvips.Image.new_from_buffer(body, "")


def wagtail_pixels(rendition: Any) -> pyvips.Image:
    with rendition.file.open("rb") as handle:
        return pyvips.Image.new_from_buffer(handle.read(), "")


def difference(a: pyvips.Image, b: pyvips.Image) -> float:
    """Mean absolute difference of two same-size images' RGB."""
    a, b = (image.colourspace("srgb")[:3] for image in (a, b))
    return float((a.cast("float") - b.cast("float")).abs().avg())


def image_sources(html: str) -> list[str]:
    """Every URL in ``src`` and ``srcset`` attributes."""
    found = [unescape(url) for url in re.findall(r'\bsrc="([^"]+)"', html)]
    for srcset in re.findall(r'\bsrcset="([^"]+)"', html):
        found += [unescape(part.split()[0]) for part in srcset.split(",")]
    return found


# -- sizes and pixels equal Wagtail's ------------------------------------------------------


@site_only
@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("which", ["focal-point", "turned"])
def test_sizes_and_pixels_are_wagtails(
    spec: str, which: str, photo_image: Any, plain_image: Any, client: Any
) -> None:
    """Our URL's size is the rendition's; the served image is it, pixels close."""
    from django_oximg.contrib.wagtail.renditions import get_rendition

    image = photo_image if which == "focal-point" else plain_image
    ours = get_rendition(image, spec)
    theirs = image.get_rendition(spec)
    assert (ours.width, ours.height) == (theirs.width, theirs.height)
    served = fetch(client, ours.url)
    assert (served.width, served.height) == (theirs.width, theirs.height)
    # Pillow's and libvips' resamplers and encoders differ a little; a crop
    # rectangle a few source pixels off differs by much more (see below).
    assert difference(served, wagtail_pixels(theirs)) < 4.0


@site_only
def test_a_misplaced_crop_would_show(photo_image: Any, client: Any) -> None:
    """The pixel check above can tell: the focal point's crop against the centre's."""
    from django_oximg.contrib.wagtail.renditions import get_rendition

    ours = fetch(client, get_rendition(photo_image, "fill-200x200-c50").url)
    centred = photo_image.get_rendition("fill-200x200")
    assert difference(ours, wagtail_pixels(centred)) > 8.0


@site_only
def test_the_format_and_quality_are_wagtails(photo_image: Any, client: Any) -> None:
    from django_oximg.contrib.wagtail.renditions import get_rendition

    assert get_rendition(photo_image, "width-100").url.endswith("@jpeg")
    assert get_rendition(photo_image, "width-100|format-webp").url.endswith("@webp")
    low = client.get(get_rendition(photo_image, "width-400|jpegquality-20").url)
    high = client.get(get_rendition(photo_image, "width-400|jpegquality-95").url)
    assert len(low.getvalue()) < len(high.getvalue()) / 2
    # webpquality- does not apply to a JPEG, as in Wagtail.
    plain = get_rendition(photo_image, "width-400")
    assert get_rendition(photo_image, "width-400|webpquality-10").url == plain.url


@site_only
def test_bgcolor_flattens_alpha_as_wagtail(db: None, media: Path, client: Any) -> None:
    base = flat(300, 200, (20, 200, 40))
    alpha = (pyvips.Image.black(300, 200) + 255).draw_rect(0, 0, 0, 150, 200, fill=True)
    image = upload("alpha.png", bytes(base.bandjoin(alpha).cast("uchar").pngsave_buffer()))
    from django_oximg.contrib.wagtail.renditions import get_rendition

    served = fetch(client, get_rendition(image, "width-100|bgcolor-f00").url)
    assert not served.hasalpha()
    assert list(served(10, 50)) == pytest.approx([255, 0, 0], abs=2)
    assert list(served(90, 50)) == pytest.approx([20, 200, 40], abs=2)
    theirs = wagtail_pixels(image.get_rendition("width-100|bgcolor-f00"))
    assert difference(served, theirs) < 4.0


# -- the page -------------------------------------------------------------------------


@site_only
def test_the_page_renders_urls_and_no_renditions(photo_page: Any, client: Any) -> None:
    """A page view writes no rendition row and no file; every URL serves its size."""
    from wagtail.images.models import Rendition

    response = client.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    assert Rendition.objects.count() == 0
    media = Path(settings.MEDIA_ROOT)
    assert not (media / "images").exists()  # Wagtail's renditions
    assert not (media / "oximg").exists()  # django-oximg's results: none rendered yet
    thumb = re.search(r"<img [^>]*class=\"thumb\"[^>]*>", html)
    assert thumb is not None
    tag = thumb.group(0)
    assert 'width="200"' in tag and 'height="200"' in tag and 'alt="photo.jpg"' in tag
    assert 'loading="lazy"' in tag
    hero = re.search(r'data-size="(\d+)x(\d+)"', html)
    assert hero is not None
    assert hero.groups() == ("400", "300")
    assert "background-position: " in html
    urls = list(dict.fromkeys(image_sources(html) + re.findall(r"url\('([^']+)'\)", html)))
    assert len(urls) == 1 + 1 + 2 + 4  # image, hero, srcset_image, picture (src is in srcset)
    assert all(url.startswith("/img/") for url in urls)
    sizes = {url: fetch(client, url) for url in urls}
    assert (media / "oximg").is_dir()
    photo = photo_page.photo
    assert (sizes[urls[0]].width, sizes[urls[0]].height) == (200, 200)
    expected = {
        (r.width, r.height)
        for r in photo.get_renditions(
            "fill-200x200", "width-320", "width-640", "max-400x400", "max-800x800"
        ).values()
    }
    assert {(image.width, image.height) for image in sizes.values()} <= expected | {(400, 300)}


@site_only
def test_the_as_form_and_picture_match_wagtails_tags(photo_image: Any) -> None:
    """Same HTML as Wagtail's own tags, but for the URLs."""
    text = (
        "{% image photo fill-200x200 class='x' %}"
        "{% image photo width-300 as t %}[{{ t.width }}x{{ t.height }} {{ t.alt }}]"
        "{% image photo fill-300x100-c50 as f %}[{{ f.background_position_style }}]"
        "[{{ f.focal_point }} {{ f.attrs }}]"
        "{% srcset_image photo width-{100,200} sizes='50vw' %}"
        "{% picture photo format-{webp,jpeg} width-{100,200} %}"
    )
    context = Context({"photo": photo_image})
    ours = Template("{% load oximg_wagtail %}" + text).render(context)
    theirs = Template("{% load wagtailimages_tags %}" + text).render(context)
    assert "/img/" in ours and "/img/" not in theirs
    url = re.compile(r"(/img/|/media/images/)[^\" ,]+")
    assert url.sub("URL", ours) == url.sub("URL", theirs)


@site_only
def test_a_missing_file_renders_as_in_wagtail(photo_image: Any) -> None:
    """Wagtail's "not-found" rendition: ``src`` "/media/not-found", 0x0, nothing logged."""
    Path(photo_image.file.path).unlink()
    text = "{% image photo fill-200x200 %}{% image photo width-50 as t %}{{ t.width }}"
    context = Context({"photo": photo_image})
    ours = Template("{% load oximg_wagtail %}" + text).render(context)
    theirs = Template("{% load wagtailimages_tags %}" + text).render(context)
    assert ours == theirs
    assert 'src="/media/not-found"' in ours


@site_only
def test_a_source_over_the_resolution_limit_renders_the_not_found_rendition(
    photo_image: Any, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Stored before the limit was checked: Wagtail's fallback, never a URL answering 422."""
    settings.OXIMG = {**settings.OXIMG, "MAX_SRC_RESOLUTION": 1200 * 900 - 1}
    text = "{% image photo fill-200x200 %}{% srcset_image photo width-{100,200} %}"
    with caplog.at_level("WARNING", logger="django_oximg"):
        html = Template("{% load oximg_wagtail %}" + text).render(Context({"photo": photo_image}))
    assert "/img/" not in html
    assert html.count('src="/media/not-found"') == 2
    assert "SourceTooLarge: 1200x900x1 px exceeds 1079999" in caplog.text


@site_only
def test_a_size_the_server_would_change_is_refused(
    photo_image: Any, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """``MAX_RESULT_DIMENSION`` below Wagtail's size: a WARNING and the not-found
    rendition, not a URL whose image would have another size (or an error with
    ``RAISE_TEMPLATE_ERRORS``)."""
    settings.OXIMG = {**settings.OXIMG, "MAX_RESULT_DIMENSION": 100}
    template = Template("{% load oximg_wagtail %}{% image photo fill-200x200 %}")
    with caplog.at_level("WARNING", logger="django_oximg"):
        html = template.render(Context({"photo": photo_image}))
    assert 'src="/media/not-found"' in html
    assert "the server would make 100x100, Wagtail 200x200" in caplog.text
    settings.OXIMG = {**settings.OXIMG, "RAISE_TEMPLATE_ERRORS": True}
    with pytest.raises(ThumbnailError, match="MAX_RESULT_DIMENSION"):
        template.render(Context({"photo": photo_image}))


@site_only
def test_no_image_renders_nothing(db: None) -> None:
    rendered = Template("{% load oximg_wagtail %}[{% image photo fill-20x20 %}]").render(
        Context({"photo": None})
    )
    assert rendered == "[]"


@site_only
@pytest.mark.parametrize(
    ("tag", "message"),
    [
        ("{% image p fill-20 %}", "bad image filter spec"),
        ("{% image p fill-20x20-z9 %}", "Unrecognised filter spec part"),
        ("{% image p blur-3 %}", "Unrecognised operation: blur"),
        ("{% image p width-abc %}", "bad image filter spec"),
        ("{% image p width-200 format-ico %}", "format-ico is not served"),
        ("{% image p width-200 format-webp-lossless %}", "format-webp-lossless is not served"),
        ("{% srcset_image p width-{100,abc} %}", "bad image filter spec"),
        ("{% image p %}", "at least one filter spec"),
    ],
)
def test_a_bad_spec_fails_when_the_template_compiles(tag: str, message: str) -> None:
    with pytest.raises(TemplateSyntaxError, match=re.escape(message)):
        Template("{% load oximg_wagtail %}" + tag)


@site_only
def test_the_library_can_stand_in_for_wagtails(photo_image: Any) -> None:
    """``TEMPLATES``' ``libraries`` option: ``{% load wagtailimages_tags %}`` gets ours."""
    engine = Engine(
        libraries={"wagtailimages_tags": "django_oximg.contrib.wagtail.templatetags.oximg_wagtail"}
    )
    template = engine.from_string(
        "{% load wagtailimages_tags %}{% image photo fill-50x50 %} {% image_url photo 'width-9' %}"
    )
    html = template.render(Context({"photo": photo_image}))
    assert 'src="/img/' in html and 'width="50"' in html
    assert re.search(r" /img/\S+/w:9/", html)


@site_only
def test_image_url_is_the_images_url(photo_image: Any) -> None:
    from django_oximg.contrib.wagtail.renditions import get_rendition

    text = "{% load oximg_wagtail %}{% image_url photo spec %}"
    url = Template(text).render(Context({"photo": photo_image, "spec": "fill-30x20"}))
    assert url == escape(get_rendition(photo_image, "fill-30x20").url)
    with pytest.raises(ThumbnailError, match="bad image filter spec"):
        Template(text).render(Context({"photo": photo_image, "spec": "fill-30"}))


@site_only
def test_a_tampered_url_is_refused_not_an_error(photo_image: Any, client: Any) -> None:
    from django_oximg.contrib.wagtail.renditions import get_rendition

    url = get_rendition(photo_image, "fill-200x200").url
    tampered = url.replace("c:", "c:1", 1)
    assert client.get(tampered).status_code == 403


@site_only
def test_the_documented_template_is_the_one_tested() -> None:
    """docs/wagtail.md shows tests/wagtail_site's page template, word for word."""
    template = REPO / "tests/wagtail_site/templates/wagtail_site/photo_page.html"
    assert template.read_text().strip() in (REPO / "docs/wagtail.md").read_text()


# -- a custom image model with OximgRenditionsMixin: Wagtail's own callers -------------


@pytest.fixture
def site_image(db: None, media: Path) -> Any:
    """The site's image model (``SiteImage``, with the mixin): 1200x900, a focal point."""
    from django.core.files.images import ImageFile

    from tests.wagtail_site.models import SiteImage

    return SiteImage.objects.create(
        title="Harbour",
        file=ImageFile(io.BytesIO(drawn_jpeg(1200, 900)), name="harbour.jpg"),
        focal_point_x=900,
        focal_point_y=220,
        focal_point_width=150,
        focal_point_height=120,
    )


@pytest.fixture
def article_page(site_image: Any) -> Any:
    """An ArticlePage: ``site_image`` as its hero, in an ImageBlock and an ImageChooserBlock."""
    import json

    from wagtail.models import Page, Site

    from tests.wagtail_site.models import ArticlePage

    body = [
        {
            "type": "image",
            "value": {"image": site_image.pk, "alt_text": "Boats at dawn", "decorative": False},
        },
        {"type": "chosen", "value": site_image.pk},
    ]
    root = Page.get_first_root_node()
    page = ArticlePage(title="Article", slug="article", hero=site_image, body=json.dumps(body))
    page = root.add_child(instance=page)
    Site.objects.update(root_page=page)
    return page


def wagtails_rendition(image: Any, spec: str) -> Any:
    """Wagtail's own rendition of a ``SiteImage``, past the mixin (it writes a row)."""
    from wagtail.images.models import AbstractImage

    return AbstractImage.get_rendition(image, spec)


def rendition_rows() -> int:
    from tests.wagtail_site.models import SiteRendition

    return int(SiteRendition.objects.count())


@site_only
@pytest.mark.parametrize("spec", SPECS)
def test_the_mixins_get_rendition_is_a_url_at_wagtails_size(
    spec: str, site_image: Any, client: Any
) -> None:
    """``image.get_rendition()`` of the mixin's model: a django-oximg URL, no row,
    Wagtail's size, and the served image is that size."""
    ours = site_image.get_rendition(spec)
    assert ours.url.startswith("/img/")
    assert rendition_rows() == 0
    served = fetch(client, ours.url)
    theirs = wagtails_rendition(site_image, spec)
    assert (ours.width, ours.height) == (theirs.width, theirs.height)
    assert (served.width, served.height) == (theirs.width, theirs.height)
    assert difference(served, wagtail_pixels(theirs)) < 4.0


@site_only
def test_the_mixins_get_renditions_take_wagtails_arguments(site_image: Any) -> None:
    from wagtail.images.exceptions import InvalidFilterSpecError
    from wagtail.images.models import Filter

    found = site_image.get_renditions("width-100", Filter(spec="fill-50x50"), "width-100")
    assert list(found) == ["width-100", "fill-50x50"]
    assert [(r.width, r.height) for r in found.values()] == [(100, 75), (50, 50)]
    assert all(r.url.startswith("/img/") for r in found.values())
    assert site_image.get_rendition(Filter(spec="fill-50x50")).url == found["fill-50x50"].url
    with pytest.raises(InvalidFilterSpecError):
        site_image.get_rendition("fill-50")
    assert rendition_rows() == 0


@site_only
def test_the_streamfield_page_serves_urls_at_wagtails_sizes(
    article_page: Any, site_image: Any, client: Any
) -> None:
    """Wagtail's own tags (``{% load wagtailimages_tags %}``), its ImageBlock and
    ImageChooserBlock: every URL django-oximg's, no rendition row, Wagtail's sizes."""
    response = client.get(article_page.url)
    assert response.status_code == 200
    html = response.content.decode()
    assert rendition_rows() == 0
    assert 'alt="Boats at dawn"' in html  # the ImageBlock's own alt text
    urls = list(dict.fromkeys(image_sources(html)))
    # fill-200x200; picture's four (two formats, two widths); the ImageBlock's
    # template's fill-600x338; the ImageChooserBlock's "original"
    assert len(urls) == 1 + 4 + 1 + 1
    assert all(url.startswith("/img/") for url in urls)
    sizes = {(image.width, image.height) for image in (fetch(client, url) for url in urls)}
    specs = ["fill-200x200", "width-320", "width-640", "fill-600x338", "original"]
    assert sizes == {
        (r.width, r.height) for r in (wagtails_rendition(site_image, s) for s in specs)
    }


@site_only
def test_the_api_rendition_field_serves_a_url(article_page: Any, client: Any) -> None:
    """The pages API's ``ImageRenditionField``: django-oximg's URL at Wagtail's size."""
    response = client.get(f"/api/v2/pages/{article_page.pk}/")
    assert response.status_code == 200
    thumbnail = response.json()["hero_thumbnail"]
    assert thumbnail["url"].startswith("/img/")
    assert thumbnail["full_url"] == "http://testserver" + thumbnail["url"]
    assert (thumbnail["width"], thumbnail["height"]) == (100, 80)
    assert thumbnail["alt"] == "Harbour"
    served = fetch(client, thumbnail["url"])
    assert (served.width, served.height) == (100, 80)
    assert rendition_rows() == 0


@site_only
def test_a_missing_file_is_wagtails_not_found(article_page: Any, client: Any) -> None:
    """The mixin raises Wagtail's SourceImageIOError: the tag's "not-found"
    rendition and the API's error entry, as without it."""
    Path(article_page.hero.file.path).unlink()
    html = client.get(article_page.url).content.decode()
    assert 'src="/media/not-found"' in html and "/img/" not in html
    api = client.get(f"/api/v2/pages/{article_page.pk}/").json()
    assert api["hero_thumbnail"] == {"error": "SourceImageIOError"}
    assert rendition_rows() == 0


@site_only
def test_what_no_url_serves_falls_back_to_wagtails_rendition(
    site_image: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A filter operation with no URL option: Wagtail's rendition (a row), one
    WARNING; the other specs of the same call stay django-oximg's."""
    with caplog.at_level("WARNING", logger="django_oximg"):
        found = site_image.get_renditions("width-100|format-webp-lossless", "width-50")
    assert found["width-100|format-webp-lossless"].url.startswith("/media/images/")
    assert found["width-50"].url.startswith("/img/")
    assert rendition_rows() == 1
    assert "format-webp-lossless is not served" in caplog.text


@site_only
def test_the_mixin_needs_no_template_library_so_no_w003(settings: Any) -> None:
    """With the mixin, templates keep Wagtail's library: Django's check finds no
    two libraries under one name. The ``libraries`` override does (templates.W003)."""
    from django.core.checks import run_checks

    def template_warnings() -> list[str]:
        return [message.id for message in run_checks() if message.id == "templates.W003"]

    assert template_warnings() == []
    override = "django_oximg.contrib.wagtail.templatetags.oximg_wagtail"
    settings.TEMPLATES = [
        {**settings.TEMPLATES[0], "OPTIONS": {"libraries": {"wagtailimages_tags": override}}}
    ]
    assert template_warnings() == ["templates.W003"]


@site_only
def test_wagtails_serve_view_redirects_to_the_url(site_image: Any, client: Any) -> None:
    """``{% image_url %}`` links to Wagtail's serve view; with ``action="redirect"``
    it sends the browser to the django-oximg URL (its "serve" action needs a file)."""
    url = Template("{% load wagtailimages_tags %}{% image_url img 'fill-40x30' %}").render(
        Context({"img": site_image})
    )
    assert url.startswith("/images/")
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == site_image.get_rendition("fill-40x30").url
    served = fetch(client, response["Location"])
    assert (served.width, served.height) == (40, 30)
    assert rendition_rows() == 0


@site_only
def test_progressive_jpegs_as_wagtail_saves_them(
    site_image: Any, settings: Any, client: Any
) -> None:
    """``JPEG_PROGRESSIVE`` and ``WAGTAILIMAGES_JPEG_QUALITY``: the kind of file
    Wagtail's rendition is (progressive, its quality), at Wagtail's size."""
    from PIL import Image as PILImage

    def jpeg_of(data: bytes) -> Any:
        return PILImage.open(io.BytesIO(data))

    baseline = client.get(site_image.get_rendition("width-300").url).getvalue()
    settings.WAGTAILIMAGES_JPEG_QUALITY = 85
    settings.OXIMG = {**settings.OXIMG, "JPEG_PROGRESSIVE": True}
    ours = site_image.get_rendition("width-300")
    assert "/q:85/" in ours.url
    served = client.get(ours.url).getvalue()
    with wagtails_rendition(site_image, "width-300").file.open("rb") as handle:
        theirs = handle.read()
    assert not jpeg_of(baseline).info.get("progressive")
    assert jpeg_of(served).info.get("progressive") and jpeg_of(theirs).info.get("progressive")
    assert jpeg_of(served).size == jpeg_of(theirs).size == (300, 225)


@site_only
def test_the_image_tags_app_config_serves_wagtails_library_without_w003(
    photo_image: Any,
) -> None:
    """``OximgImageTagsConfig`` in INSTALLED_APPS: ``{% load wagtailimages_tags %}``
    gives django-oximg's tags, for Wagtail's own image model, and Django's check
    finds no library registered twice."""
    from django.apps import AppConfig
    from django.core.checks import run_checks
    from wagtail.images.templatetags import wagtailimages_tags

    text = (
        "{% load wagtailimages_tags %}{% image photo fill-50x50 %} "
        "{% image_url photo 'width-9' %} {% picture photo width-{40,80} %}"
    )
    context = Context({"photo": photo_image})
    assert "/img/" not in Template(text).render(context)
    saved = dict(wagtailimages_tags.register.tags)
    config = AppConfig.create("django_oximg.contrib.wagtail.apps.OximgImageTagsConfig")
    try:
        config.ready()
        html = Template(text).render(context)
        assert not any(message.id == "templates.W003" for message in run_checks())
    finally:
        wagtailimages_tags.register.tags.clear()
        wagtailimages_tags.register.tags.update(saved)
    assert re.search(r'<img [^>]*src="/img/[^"]+"[^>]*width="50"', html)
    assert re.search(r" /img/\S+/w:9/", html)
    assert "<picture>" in html and "/media/" not in html
    assert "/img/" not in Template(text).render(context)  # undone: Wagtail's again


@site_only
def test_serving_wagtails_image_tags_can_be_undone(photo_image: Any) -> None:
    from wagtail.images.templatetags import wagtailimages_tags

    from django_oximg.contrib.wagtail.templatetags.oximg_wagtail import (
        serve_wagtails_image_tags,
    )

    before = dict(wagtailimages_tags.register.tags)
    undo = serve_wagtails_image_tags()
    assert wagtailimages_tags.register.tags != before
    undo()
    assert wagtailimages_tags.register.tags == before


@site_only
def test_the_admins_chooser_preview_is_a_url(site_image: Any, client: Any) -> None:
    """The admin's image chooser widget asks ``get_rendition`` for its preview."""
    from wagtail.images.widgets import AdminImageChooser

    preview = AdminImageChooser().get_value_data_from_instance(site_image)["preview"]
    assert preview["url"].startswith("/img/")
    assert rendition_rows() == 0
    served = fetch(client, preview["url"])
    theirs = wagtails_rendition(site_image, "max-165x165")
    assert (preview["width"], preview["height"]) == (theirs.width, theirs.height) == (165, 123)
    assert (served.width, served.height) == (165, 123)


@site_only
@pytest.mark.parametrize(
    ("limit", "message"),
    [
        ({"MAX_SRC_RESOLUTION": 1_000_000}, "1200x900 is over MAX_SRC_RESOLUTION (1000000)"),
        ({"MAX_SRC_FILE_SIZE": 1000}, "bytes is over MAX_SRC_FILE_SIZE (1000)"),
    ],
)
def test_a_source_over_the_limits_gets_wagtails_rendition_not_a_failing_url(
    site_image: Any,
    settings: Any,
    client: Any,
    caplog: pytest.LogCaptureFixture,
    limit: dict[str, int],
    message: str,
) -> None:
    """No django-oximg URL would serve it: Wagtail renders it instead, with one WARNING."""
    from django_oximg.contrib.wagtail.renditions import get_rendition
    from django_oximg.core.errors import SourceTooLarge

    settings.OXIMG = {**settings.OXIMG, **limit}
    # django-oximg's own renditions refuse a resolution they see in the header;
    # a file size they cannot see makes a URL its server refuses.
    if "MAX_SRC_RESOLUTION" in limit:
        with pytest.raises(SourceTooLarge):
            get_rendition(site_image, "width-100")
    else:
        assert client.get(get_rendition(site_image, "width-100").url).status_code == 422
    with caplog.at_level("WARNING", logger="django_oximg"):
        found = site_image.get_rendition("width-100")
    assert found.url.startswith("/media/images/")
    assert (found.width, found.height) == (100, 75)
    assert rendition_rows() == 1
    assert message in caplog.text
