"""``django_oximg.drf.ThumbnailField`` through a real Django REST framework API.

The API is tests/photosapp/api.py (docs/drf.md's example, checked against
the page below): a ``ReadOnlyModelViewSet`` on a router, mounted with the
thumbnail view in tests/photosapp/urls.py. Every URL the API gives is then
fetched through the thumbnail view, and what is served must be the size the
API promised.
"""

from __future__ import annotations

import ast
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import pyvips
from django.core.cache import cache
from django.test import Client

from django_oximg.core.errors import SourceNotFound
from django_oximg.drf import ThumbnailField
from django_oximg.thumbnails import ThumbnailError
from tests.photosapp.api import PhotoSerializer
from tests.photosapp.models import Photo

REPO_ROOT = Path(__file__).resolve().parent.parent
LANDSCAPE = "photos/landscape.jpg"  # 640x480, drawn by the media fixture

pytestmark = [
    pytest.mark.urls("tests.photosapp.urls"),
    pytest.mark.django_db,
    pytest.mark.usefixtures("connections_closed_afterwards"),
]


@pytest.fixture(autouse=True)
def fresh_cache(media: Path) -> Iterator[Path]:
    cache.clear()
    yield media
    cache.clear()


def api(client: Client, path: str) -> Any:
    response = client.get(path, HTTP_ACCEPT="application/json")
    assert response.status_code == 200, response.content[:500]
    assert response["Content-Type"] == "application/json"
    return response.json()


def served(client: Client, url: str) -> tuple[pyvips.Image, str]:
    """The image the thumbnail view serves for an absolute ``url``, and its content type."""
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc) == ("http", "testserver")
    response = client.get(parts.path)
    try:
        assert response.status_code == 200, response.content[:200]
        body = b"".join(response.streaming_content) if response.streaming else response.content
        content_type = response["Content-Type"]
    finally:
        response.close()
    return pyvips.Image.new_from_buffer(body, ""), content_type


def test_the_api_gives_absolute_urls_of_the_sizes_the_view_serves(client: Client) -> None:
    photo = Photo.objects.create(title="Gradient", image=LANDSCAPE)
    (item,) = api(client, "/api/photos/")
    assert (item["id"], item["title"]) == (photo.pk, "Gradient")
    thumbnail = item["thumbnail"]
    assert set(thumbnail) == {"url", "width", "height"}
    assert (thumbnail["width"], thumbnail["height"]) == (200, 300)
    image, content_type = served(client, thumbnail["url"])
    assert (image.width, image.height) == (200, 300)
    assert content_type == "image/jpeg"


def test_a_srcset_lists_each_width_the_view_serves(client: Client) -> None:
    Photo.objects.create(title="Gradient", image=LANDSCAPE)
    (item,) = api(client, "/api/photos/")
    hero = item["hero"]
    # 1200x675 does not fit in 640x480 without enlarging: the widest 16:9 box that does.
    assert (hero["width"], hero["height"]) == (640, 360)
    sizes = [(c["width"], c["height"]) for c in hero["candidates"]]
    assert sizes == [(400, 225), (640, 360)]
    assert hero["srcset"] == ", ".join(f"{c['url']} {c['width']}w" for c in hero["candidates"])
    assert hero["url"] == hero["candidates"][-1]["url"]
    for candidate in hero["candidates"]:
        image, content_type = served(client, candidate["url"])
        assert (image.width, image.height) == (candidate["width"], candidate["height"])
        assert content_type == "image/webp"


def test_the_detail_view_and_the_focal_point(client: Client) -> None:
    photo = Photo.objects.create(title="x", image=LANDSCAPE, focal_point="0.1,0.5")
    item = api(client, f"/api/photos/{photo.pk}/")
    assert "/g:fp:0.1:0.5/" in item["thumbnail"]["url"]
    assert all("/g:fp:0.1:0.5/" in c["url"] for c in item["hero"]["candidates"])
    image, _ = served(client, item["thumbnail"]["url"])
    assert (image.width, image.height) == (200, 300)


def test_no_file_or_a_missing_file_is_null(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    Photo.objects.create(title="empty", image="")
    Photo.objects.create(title="gone", image="photos/gone.jpg")
    with caplog.at_level(logging.WARNING, logger="django_oximg"):
        items = api(client, "/api/photos/")
    assert [(i["title"], i["thumbnail"], i["hero"]) for i in items] == [
        ("empty", None, None),
        ("gone", None, None),
    ]
    messages = [r.getMessage() for r in caplog.records if r.name == "django_oximg"]
    assert len(messages) == 2 and all("photos/gone.jpg" in m for m in messages)


def test_a_source_over_the_resolution_limit_is_null(client: Client, settings: Any) -> None:
    """A stored photo the server would refuse: null, never a URL that answers 422."""
    Photo.objects.create(title="big", image=LANDSCAPE)
    settings.OXIMG = {**settings.OXIMG, "MAX_SRC_RESOLUTION": 640 * 480 - 1}
    [item] = api(client, "/api/photos/")
    assert (item["thumbnail"], item["hero"]) == (None, None)


def test_without_a_request_in_the_context_the_urls_are_relative() -> None:
    photo = Photo.objects.create(title="x", image=LANDSCAPE)
    data = PhotoSerializer(photo).data
    assert data["thumbnail"]["url"].startswith("/img/")
    assert data["hero"]["srcset"].startswith("/img/")


def test_the_field_is_read_only() -> None:
    photo = Photo.objects.create(title="x", image=LANDSCAPE)
    serializer = PhotoSerializer(photo, data={"title": "y", "thumbnail": {"url": "evil"}})
    assert serializer.is_valid(), serializer.errors
    assert serializer.validated_data == {"title": "y"}


@pytest.mark.parametrize(
    ("geometry", "kwargs", "message"),
    [
        ("200x300", {"crop": "middle"}, "bad crop 'middle'"),
        ("huge", {}, "bad geometry 'huge'"),
        ("", {}, "no geometry"),
        ("200x300", {"quality": "high"}, "bad quality 'high'"),
        ("200x300", {"progressive": True}, "progressive: JPEGs are written baseline"),
        ("200x300", {"format": "bmp"}, "unknown format 'bmp'"),
        ("200x300", {"focal_point": "2,2"}, "outside 0..1"),
        ("200x300", {"widths": "0,100"}, "bad widths"),
        ("200x300", {"widths": [100], "dpr": 2}, "dpr is not allowed"),
        ("200x300", {"options": "nope:1"}, "bad options 'nope:1'"),
    ],
)
def test_a_bad_argument_fails_when_the_field_is_declared(
    geometry: str, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ThumbnailError, match=f"^ThumbnailField: .*{re.escape(message)}"):
        ThumbnailField(geometry, source="image", **kwargs)


def test_presets_and_drf_keywords(settings: Any) -> None:
    settings.OXIMG = {**settings.OXIMG, "PRESETS": {"avatar": "rs:fill:64:64/f:png"}}
    field = ThumbnailField("avatar", source="image", label="Avatar", help_text="64 px")
    assert (field.source, field.label, field.help_text, field.read_only) == (
        "image",
        "Avatar",
        "64 px",
        True,
    )
    photo = Photo.objects.create(title="x", image=LANDSCAPE)
    assert field.to_representation(photo.image) == {
        "url": field.to_representation(photo.image)["url"],
        "width": 64,
        "height": 64,
    }
    assert "/pr:avatar/" in field.to_representation(photo.image)["url"]


def test_raise_template_errors_raises_here_too(settings: Any) -> None:
    settings.OXIMG = {**settings.OXIMG, "RAISE_TEMPLATE_ERRORS": True}
    photo = Photo.objects.create(title="gone", image="photos/gone.jpg")
    with pytest.raises(SourceNotFound, match=r"gone\.jpg"):
        _ = PhotoSerializer(photo).data


def test_only_the_drf_module_imports_rest_framework() -> None:
    importers = []
    for path in sorted((REPO_ROOT / "django_oximg").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            if any(name.split(".")[0] == "rest_framework" for name in names):
                importers.append(path.relative_to(REPO_ROOT).as_posix())
    assert sorted(set(importers)) == ["django_oximg/drf.py"]


def test_the_page_shows_the_example_api_as_it_is() -> None:
    page = (REPO_ROOT / "docs" / "drf.md").read_text()
    text = (REPO_ROOT / "tests" / "photosapp" / "api.py").read_text()
    docstring = ast.parse(text).body[0]
    body = "".join(text.splitlines(keepends=True)[docstring.end_lineno :]).strip()
    assert f"```python\n# api.py\n{body}\n```" in page
