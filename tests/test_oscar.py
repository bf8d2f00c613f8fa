"""django-oscar's ``OSCAR_THUMBNAILER`` served by django-oximg (django_oximg/contrib/oscar.py).

A real Oscar shop (tests/oscar_shop/settings.py, tests/oscar_shop/): Oscar's
apps' tables in the test database, Haystack's Whoosh index of the
catalogue, products made with images drawn by the tests, Oscar's own views
and templates (the catalogue's product list and a product's page) rendered
by Django's test client, every thumbnail URL fetched through the real
view. Each page is rendered twice, with
Oscar's own ``SorlThumbnail`` (sorl-thumbnail writes its files into the
media root) and with django-oximg's: the HTML must be the same but for the
URLs, and each image served the size of sorl-thumbnail's file in the same
place.

Oscar's apps bring models and migrations the rest of the suite must not
have, so under tests/settings.py this module only runs itself in a pytest
of its own with ``--ds tests.oscar_shop.settings`` (:func:`test_the_oscar_shop`),
as tests/test_wagtail.py does for Wagtail.
"""

from __future__ import annotations

import importlib.util
import io
import logging
import re
from html import unescape
from pathlib import Path
from typing import Any

import django
import pytest
import pyvips
from django.conf import settings
from django.template import Context, Template

from django_oximg.thumbnails import ThumbnailError
from tests import images
from tests.services import missing, own_pytest

#: Whether this process runs the Oscar shop's settings.
OSCAR_SHOP = settings.SETTINGS_MODULE == "tests.oscar_shop.settings"

shop_only = pytest.mark.skipif(not OSCAR_SHOP, reason="runs in test_the_oscar_shop's pytest")

# Oscar's catalogue facets its searches; Whoosh cannot, and says so on each page.
pytestmark = pytest.mark.filterwarnings("ignore:Whoosh does not handle")

#: The Django every run must test Oscar on (`make test`'s LTS venv).
LTS = (5, 2)

OURS = "django_oximg.contrib.oscar.SorlThumbnail"
OSCARS = "oscar.core.thumbnails.SorlThumbnail"

#: The product images: (width, height, EXIF orientation) as stored.
IMAGES = {
    "landscape.jpg": (1200, 900, 1),
    "sideways.jpg": (1000, 640, 6),  # shown 640x1000
    "tiny.jpg": (50, 40, 1),  # smaller than every box: upscale=False keeps it
    "alpha.png": (300, 200, 1),
    "halves.jpg": (309, 310, 1),  # "x155": 154.5 wide, which sorl rounds down, imgproxy up
}


def test_the_oscar_shop() -> None:
    """This module's tests, in a pytest with the Oscar shop's settings."""
    if OSCAR_SHOP:
        pytest.skip("this is the Oscar shop's run")
    for module in ("oscar", "sorl", "whoosh"):
        if importlib.util.find_spec(module) is not None:
            continue
        message = f"{module} is not installed (pip install --group oscar)"
        if django.VERSION[:2] != LTS:
            # The Makefile installs the group only beside a Django Oscar supports.
            pytest.skip(f"{message}: django-oscar may not support Django {django.__version__}")
        missing(message)
    result = own_pytest(
        __file__,
        "tests.oscar_shop.settings",
        # Oscar's tables made from its models: its 150-odd migrations take
        # a minute here, and their history is not what these tests are about.
        "--nomigrations",
    )
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-4000:]
    assert " passed" in result.stdout and " failed" not in result.stdout


# -- the shop ---------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _fresh_shop() -> None:
    """Each test's database and media root are new: the search index is
    emptied, so are sorl-thumbnail's key-value store and django-oximg's
    source metadata (in the default cache), and sorl-thumbnail takes the
    storage anew."""
    if not OSCAR_SHOP:
        return  # the driver, where sorl-thumbnail may not be installed
    from django.core.cache import caches
    from haystack import connections

    from tests.oscar_shop import sorl_state

    connections["default"].get_backend().clear()
    caches["default"].clear()
    sorl_state.forget_storage()


def drawn(name: str) -> bytes:
    width, height, orientation = IMAGES[name]
    if name.endswith(".png"):
        return images.png_with_alpha(width, height)
    image = images.photo(width, height).copy()
    if orientation != 1:
        image.set_type(pyvips.GValue.gint_type, "orientation", orientation)
    return bytes(image.jpegsave_buffer(Q=90))


def add_image(product: Any, name: str, order: int) -> Any:
    """A ProductImage saved from a drawn file, as the dashboard's upload saves one."""
    from django.core.files.images import ImageFile
    from oscar.core.loading import get_model

    image_model = get_model("catalogue", "ProductImage")
    original = ImageFile(io.BytesIO(drawn(name)), name=name)
    return image_model.objects.create(product=product, original=original, display_order=order)


@pytest.fixture
def products(db: None, media: Path) -> list[Any]:
    """Four products: one per image, one with all of them, one with none."""
    from oscar.test.factories import create_product

    made = []
    for index, name in enumerate(IMAGES):
        product = create_product(title=f"Product {index}", price=10 + index, num_in_stock=5)
        add_image(product, name, 0)
        made.append(product)
    gallery = create_product(title="Gallery", price=30, num_in_stock=5)
    for order, name in enumerate(IMAGES):
        add_image(gallery, name, order)
    made.append(gallery)
    made.append(create_product(title="No image", price=40, num_in_stock=5))
    return made


def image_sources(html: str) -> list[str]:
    """Every ``<img src>`` of the page, in order."""
    return [unescape(url) for url in re.findall(r'<img [^>]*\bsrc="([^"]*)"', html)]


def fetch(client: Any, url: str) -> pyvips.Image:
    """``url`` through the real view: 200, decoded."""
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    body = b"".join(response.streaming_content) if response.streaming else response.content
    response.close()
    return pyvips.Image.new_from_buffer(body, "")


def page(client: Any, settings: Any, thumbnailer: str, url: str) -> str:
    settings.OSCAR_THUMBNAILER = thumbnailer
    response = client.get(url)
    assert response.status_code == 200, url
    return response.content.decode()


def sorl_file(url: str) -> pyvips.Image:
    """The file sorl-thumbnail wrote for a ``/media/`` URL."""
    assert url.startswith(settings.MEDIA_URL), url
    path = Path(settings.MEDIA_ROOT) / url.removeprefix(settings.MEDIA_URL)
    return pyvips.Image.new_from_file(str(path))


def comparable(html: str) -> str:
    """The page without its image URLs, CSRF tokens (new on each response) and
    the time Oscar's layout stamps it with (``<meta name="created">``, to the
    minute: two renders a second apart may fall either side of one)."""
    html = re.sub(r'src="(/img/|/media/)[^"]*"', "src=URL", html)
    html = re.sub(r'<meta name="created" content="[^"]*"', "CREATED", html)
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "CSRF", html)


def compare_pages(client: Any, settings: Any, url: str) -> list[tuple[int, int]]:
    """The page with both thumbnailers: same HTML but for the URLs, same image sizes.

    Gives the sizes, in the page's order.
    """
    theirs = page(client, settings, OSCARS, url)
    ours = page(client, settings, OURS, url)
    their_urls = [src for src in image_sources(theirs) if src.startswith(settings.MEDIA_URL)]
    our_urls = [src for src in image_sources(ours) if src.startswith("/img/")]
    assert their_urls and len(our_urls) == len(their_urls)
    assert comparable(ours) == comparable(theirs)
    sizes = []
    for their_url, our_url in zip(their_urls, our_urls, strict=True):
        served, expected = fetch(client, our_url), sorl_file(their_url)
        assert (served.width, served.height) == (expected.width, expected.height), our_url
        sizes.append((served.width, served.height))
    return sizes


# -- Oscar's pages ----------------------------------------------------------------------


@shop_only
def test_the_product_list_is_sorls_sizes(products: list[Any], client: Any, settings: Any) -> None:
    """The catalogue's list: ``"x155" upscale=False`` for each product, and the
    "image not found" picture for the product without images."""
    sizes = compare_pages(client, settings, "/catalogue/")
    assert len(sizes) == len(products)
    assert (50, 40) in sizes  # tiny.jpg, not enlarged
    assert (99, 155) in sizes  # sideways.jpg, shown 640x1000: 99.2 -> 99
    assert (154, 154) in sizes  # halves.jpg: 154.5 wide, to sorl-thumbnail's arithmetic
    assert (232, 155) in sizes  # alpha.png: 232.5 wide


@shop_only
def test_a_products_gallery_is_sorls_sizes(products: list[Any], client: Any, settings: Any) -> None:
    """A product's page with four images: ``"440x400" upscale=False`` for each, and
    the carousel's ``"65x55" crop="center"``, which sorl-thumbnail enlarges."""
    gallery = products[len(IMAGES)]
    sizes = compare_pages(client, settings, gallery.get_absolute_url())
    assert len(sizes) == 2 * len(IMAGES)
    assert sizes.count((65, 55)) == len(IMAGES)  # tiny.jpg too: enlarged, as sorl does
    assert (256, 400) in sizes  # sideways.jpg in 440x400
    assert (50, 40) in sizes


@shop_only
@pytest.mark.parametrize("index", range(len(IMAGES)))
def test_a_product_with_one_image_is_sorls_size(
    index: int, products: list[Any], client: Any, settings: Any
) -> None:
    sizes = compare_pages(client, settings, products[index].get_absolute_url())
    assert len(sizes) == 1


@shop_only
def test_the_missing_image_is_served_from_a_copy(
    products: list[Any], client: Any, settings: Any
) -> None:
    """Oscar links its "image not found" picture into the media root; the jail
    refuses a link that leads out of it, so the thumbnailer puts a copy there."""
    missing_page = products[-1].get_absolute_url()
    html = page(client, settings, OURS, missing_page)
    linked = Path(settings.MEDIA_ROOT) / settings.OSCAR_MISSING_IMAGE_URL
    assert linked.is_file() and not linked.is_symlink()
    (url,) = [src for src in image_sources(html) if src.startswith("/img/")]
    served = fetch(client, url)
    original = pyvips.Image.new_from_file(str(linked))
    assert max(served.width, served.height) <= 440
    assert served.width / served.height == pytest.approx(original.width / original.height, 0.02)


# -- deleting ---------------------------------------------------------------------------


@shop_only
def test_deleting_an_image_purges_its_results_and_file(
    products: list[Any], client: Any, settings: Any
) -> None:
    """Oscar's ``OSCAR_DELETE_IMAGE_FILES`` hook: the file goes, as with sorl-thumbnail,
    and so do its cached results and metadata."""
    from django_oximg.core.keys import source_directory
    from django_oximg.purge import result_cache, result_entries
    from django_oximg.source_metadata import source_name

    image = products[0].images.get()
    source = source_name(image.original)
    path = Path(image.original.path)
    html = page(client, settings, OURS, products[0].get_absolute_url())
    for url in image_sources(html):
        if url.startswith("/img/"):
            fetch(client, url)

    def cached() -> list[str]:
        directory = source_directory(source)
        return [e.key for e in result_entries(result_cache()) if e.key.startswith(directory)]

    assert cached() and path.exists()
    image.delete()
    assert cached() == []
    assert not path.exists()


@shop_only
def test_an_empty_field_has_nothing_to_delete(db: None) -> None:
    from django_oximg.contrib.oscar import SorlThumbnail

    class Empty:
        name = ""

    SorlThumbnail().delete_thumbnails(Empty())  # no error, nothing to purge


# -- Oscar's tag with the options sorl-thumbnail's users write -------------------------------


def render(text: str, **context: Any) -> str:
    return Template("{% load image_tags %}" + text).render(Context(context))


@shop_only
def test_the_tags_options_are_the_thumbnails(products: list[Any], client: Any) -> None:
    """``size``'s "Wx", ``format`` in capitals, ``quality``, ``crop`` and ``upscale``."""
    image = products[0].images.get().original  # 1200x900
    text = (
        '{% oscar_thumbnail image "300x" format="PNG" as a %}{{ a.width }}x{{ a.height }} '
        '{% oscar_thumbnail image "100x100" crop="center" as b %}{{ b.width }}x{{ b.height }} '
        '{% oscar_thumbnail image "x3000" upscale=False as c %}{{ c.width }}x{{ c.height }} '
        '{% oscar_thumbnail image "400x300" quality=20 as low %}'
        '{% oscar_thumbnail image "400x300" quality=95 as high %}'
        "|{{ a.url }}|{{ low.url }}|{{ high.url }}"
    )
    sizes, a, low, high = render(text, image=image).split("|")
    assert sizes == "300x225 100x100 1200x900 "
    assert unescape(a).endswith("@png")
    assert fetch(client, unescape(a)).get("vips-loader").startswith("png")
    low_bytes = client.get(unescape(low)).getvalue()
    high_bytes = client.get(unescape(high)).getvalue()
    assert len(low_bytes) < len(high_bytes) / 2


@shop_only
def test_a_keyword_without_equivalent_says_what_to_write(
    products: list[Any], settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """With ``OSCAR_THUMBNAIL_DEBUG`` the error; without, Oscar's tag logs it and
    prints nothing, as it does for any thumbnailer's error."""
    image = products[0].images.get().original
    text = '{% oscar_thumbnail image "100x100" progressive=False %}'
    with pytest.raises(ThumbnailError, match="progressive: JPEGs are written baseline"):
        render(text, image=image)
    settings.OSCAR_THUMBNAIL_DEBUG = False
    with caplog.at_level(logging.ERROR, logger="oscar.thumbnail"):
        assert render(text, image=image) == ""
    assert "progressive" in caplog.text


@shop_only
def test_tag_defaults_come_before_sorls(products: list[Any], settings: Any) -> None:
    """``OXIMG["TAG_DEFAULTS"]`` over the class's defaults, the template's options over both."""
    tiny = products[2].images.get().original  # 50x40
    text = '{% oscar_thumbnail image "100x80" as t %}{{ t.width }}x{{ t.height }}'
    assert render(text, image=tiny) == "100x80"  # sorl-thumbnail enlarges
    settings.OXIMG = {**settings.OXIMG, "TAG_DEFAULTS": {"upscale": False}}
    assert render(text, image=tiny) == "50x40"
    upscaled = '{% oscar_thumbnail image "100x80" upscale=True as t %}{{ t.width }}x{{ t.height }}'
    assert render(upscaled, image=tiny) == "100x80"


@shop_only
def test_the_easy_thumbnails_class_never_enlarges_unasked(
    products: list[Any], client: Any, settings: Any
) -> None:
    """Oscar's ``EasyThumbnails`` shops: easy-thumbnails' sizes, and it enlarges only
    with ``upscale=True``."""
    settings.OSCAR_THUMBNAILER = "django_oximg.contrib.oscar.EasyThumbnails"
    tiny = products[2].images.get().original  # 50x40
    text = (
        '{% oscar_thumbnail image "65x55" crop="center" as a %}{{ a.width }}x{{ a.height }} '
        '{% oscar_thumbnail image "100x80" upscale=True as b %}{{ b.width }}x{{ b.height }}'
        "|{{ a.url }}"
    )
    sizes, url = render(text, image=tiny).split("|")
    assert sizes == "50x40 100x80"
    served = fetch(client, unescape(url))
    assert (served.width, served.height) == (50, 40)
    # Each package's rounding of 112.5, as tests/test_sizing.py has them.
    landscape = products[0].images.get().original  # 1200x900
    text = '{% oscar_thumbnail image "150x" as t %}{{ t.width }}x{{ t.height }}'
    assert render(text, image=landscape) == "150x112"
    settings.OSCAR_THUMBNAILER = OURS
    assert render(text, image=landscape) == "149x112"
