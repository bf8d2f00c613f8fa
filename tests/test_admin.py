"""ThumbnailAdminMixin and ThumbnailFileWidget through a real admin site.

The site is tests/adminapp's own (``tests.adminapp.urls``); the middleware and
context processors the admin needs are set for each test here (the
``admin_site_settings`` fixture, tests/conftest.py), so tests/settings.py
keeps an empty MIDDLEWARE for everything else.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, ClassVar

import pytest
import pyvips
from django import forms
from django.contrib import admin
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.test import Client, RequestFactory

from django_oximg.admin import AdminThumbnailFileWidget, ThumbnailAdminMixin
from django_oximg.widgets import ThumbnailFileWidget
from tests.adminapp.admin import ArtworkAdmin, site
from tests.adminapp.models import Artwork

LANDSCAPE = "photos/landscape.jpg"  # 640x480

pytestmark = [
    pytest.mark.urls("tests.adminapp.urls"),
    pytest.mark.django_db,
    pytest.mark.usefixtures("connections_closed_afterwards"),
]


@pytest.fixture(autouse=True)
def admin_settings(admin_site_settings: None, media: Path) -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


class Images(HTMLParser):
    """Every <img> of a page, and the file inputs."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.images: list[dict[str, str]] = []
        self.file_inputs: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "img":
            self.images.append(values)
        elif tag == "input" and values.get("type") == "file":
            self.file_inputs.append(values["name"])

    def thumbnails(self) -> list[dict[str, str]]:
        return [image for image in self.images if image["src"].startswith("/img/")]


def page(client: Client, url: str) -> Images:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return Images(response.content.decode())


def served(client: Client, url: str) -> pyvips.Image:
    response = client.get(url)
    try:
        assert response.status_code == 200
        body = b"".join(response.streaming_content) if response.streaming else response.content
    finally:
        response.close()
    return pyvips.Image.new_from_buffer(body, "")


def test_change_list_shows_sized_thumbnails(admin_client: Client) -> None:
    Artwork.objects.create(title="Gradient", image=LANDSCAPE)
    Artwork.objects.create(title="No file", image="")
    images = page(admin_client, "/admin/adminapp/artwork/")
    (thumbnail,) = images.thumbnails()
    assert (thumbnail["width"], thumbnail["height"]) == ("60", "60")  # crop="center"
    assert thumbnail["loading"] == "lazy"
    assert thumbnail["alt"] == ""
    image = served(admin_client, thumbnail["src"])
    assert (image.width, image.height) == (60, 60)


def test_a_file_that_is_no_image_shows_the_empty_value_and_is_logged(
    admin_client: Client, settings: Any, media: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Even so: the change list must stay usable.
    settings.OXIMG = {**settings.OXIMG, "RAISE_TEMPLATE_ERRORS": True}
    (media / "photos" / "notes.pdf").write_bytes(b"%PDF-1.4 not an image")
    Artwork.objects.create(title="Notes", image="photos/notes.pdf")
    with caplog.at_level(logging.WARNING, logger="django_oximg"):
        response = admin_client.get("/admin/adminapp/artwork/")
    assert response.status_code == 200
    assert not Images(response.content.decode()).thumbnails()
    (record,) = [r for r in caplog.records if r.name == "django_oximg"]
    assert record.levelno == logging.WARNING and "photos/notes.pdf" in record.getMessage()


def test_change_form_previews_the_current_file(admin_client: Client) -> None:
    artwork = Artwork.objects.create(title="Gradient", image=LANDSCAPE)
    images = page(admin_client, f"/admin/adminapp/artwork/{artwork.pk}/change/")
    (preview,) = images.thumbnails()
    assert (preview["width"], preview["height"]) == ("200", "150")  # fitted, whole image
    image = served(admin_client, preview["src"])
    assert (image.width, image.height) == (200, 150)
    assert images.file_inputs == ["image"]


def test_add_form_has_no_preview(admin_client: Client) -> None:
    images = page(admin_client, "/admin/adminapp/artwork/add/")
    assert images.thumbnails() == []
    assert images.file_inputs == ["image"]


def test_the_form_still_uploads_and_clears(admin_client: Client, media: Path) -> None:
    artwork = Artwork.objects.create(title="Gradient", image=LANDSCAPE)
    url = f"/admin/adminapp/artwork/{artwork.pk}/change/"
    response = admin_client.post(url, {"title": "Gradient", "image-clear": "on"})
    assert response.status_code == 302, response.content[:2000]
    artwork.refresh_from_db()
    assert not artwork.image


def test_without_thumbnail_field_or_an_image_field_it_is_explained() -> None:
    class NoField(ThumbnailAdminMixin, admin.ModelAdmin):  # type: ignore[type-arg]
        pass

    with pytest.raises(ImproperlyConfigured, match="thumbnail_field"):
        NoField(Artwork, site).thumbnail_field_name()


def test_image_fields_get_the_previewing_widget() -> None:
    picture = models.ImageField(upload_to="x/")
    picture.set_attributes_from_name("picture")
    other = models.FileField(upload_to="x/")
    other.set_attributes_from_name("attachment")
    model_admin = ArtworkAdmin(Artwork, site)
    request = RequestFactory().get("/")
    image_field = model_admin.formfield_for_dbfield(picture, request)
    file_field = model_admin.formfield_for_dbfield(other, request)
    assert image_field is not None and file_field is not None
    assert isinstance(image_field.widget, AdminThumbnailFileWidget)
    assert not isinstance(file_field.widget, ThumbnailFileWidget)


# -- the widget in a plain form ------------------------------------------------------


class ArtworkForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Artwork
        fields = ("image",)
        widgets: ClassVar[dict[str, Any]] = {
            "image": ThumbnailFileWidget(geometry="100", format="webp")
        }


def test_widget_in_a_plain_form(client: Client) -> None:
    form = ArtworkForm(instance=Artwork(title="x", image=LANDSCAPE))
    html = str(form["image"])
    assert html.startswith('<div class="oximg-preview"><img src="/img/')
    (preview,) = Images(html).thumbnails()
    assert (preview["width"], preview["height"]) == ("100", "75")
    assert preview["src"].endswith("@webp")
    assert 'type="file"' in html
    assert "image-clear" in html


def test_widget_over_the_resolution_limit_is_the_plain_input(settings: Any) -> None:
    """No preview of a stored file the server would refuse (no broken image in the form)."""
    settings.OXIMG = {**settings.OXIMG, "MAX_SRC_RESOLUTION": 640 * 480 - 1}
    html = str(ArtworkForm(instance=Artwork(title="x", image=LANDSCAPE))["image"])
    assert "/img/" not in html
    assert 'type="file"' in html


def test_widget_without_a_file_is_the_plain_input() -> None:
    html = str(ArtworkForm(instance=Artwork(title="x"))["image"])
    assert html == str(forms.ClearableFileInput().render("image", None, {"id": "id_image"}))


def test_widget_escapes(media: Path, settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.urls_empty"
    settings.OXIMG = {**settings.OXIMG, "URL_PREFIX": "/a&b'c/"}
    html = str(ArtworkForm(instance=Artwork(title="x", image=LANDSCAPE))["image"])
    assert "/a&amp;b&#x27;c/" in html
