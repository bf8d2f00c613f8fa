"""Purge hooks (django_oximg.purge): a file's thumbnails purged when its field changes or goes.

``tests.testapp`` connects ``purge_on_change(Photo, "image")`` in its
``ready()``, as a project would; ``Document`` is not connected. Purges run on
commit, so each test captures and runs the on-commit callbacks.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django.core.files.base import ContentFile
from django.db import transaction

from django_oximg import runtime
from django_oximg.core.keys import source_directory
from django_oximg.purge import purge_on_change
from django_oximg.source_metadata import metadata_key
from django_oximg.thumbnails import get_thumbnail
from tests.testapp.models import Document, Photo

LANDSCAPE = "photos/landscape.jpg"
ALPHA = "photos/alpha.png"

Capture = Callable[..., AbstractContextManager[list[Callable[[], Any]]]]

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("connections_closed_afterwards")]


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def cached_variants(media: Path, source: str) -> int:
    directory = media / "oximg" / source_directory(source)
    return len(list(directory.glob("*"))) if directory.exists() else 0


def render(source: Any, *geometries: str) -> None:
    """Put thumbnails of ``source`` in the result cache and its metadata in Django's cache."""
    thumbnailer = runtime.get_thumbnailer()
    for geometry in geometries:
        url = get_thumbnail(source, geometry).url
        reply = thumbnailer.reply("/" + url.removeprefix("/img/"), "GET", {})
        assert reply.status == 200


@pytest.fixture
def rendered(media: Path) -> Path:
    """Two variants of each of two sources, cached."""
    render(LANDSCAPE, "40x40", "20")
    render(ALPHA, "40x40", "20")
    assert cached_variants(media, LANDSCAPE) == 2
    assert cached_variants(media, ALPHA) == 2
    return media


def test_changing_the_file_purges_the_old_one_only(
    rendered: Path, django_capture_on_commit_callbacks: Capture
) -> None:
    photo = Photo.objects.create(image=LANDSCAPE)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        photo.image = ALPHA
        photo.save()
    assert len(callbacks) == 1
    assert cached_variants(rendered, LANDSCAPE) == 0
    assert cache.get(metadata_key(LANDSCAPE)) is None
    assert cached_variants(rendered, ALPHA) == 2
    assert cache.get(metadata_key(ALPHA)) is not None


def test_saving_the_same_file_purges_nothing(
    rendered: Path, django_capture_on_commit_callbacks: Capture
) -> None:
    photo = Photo.objects.create(image=LANDSCAPE)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        photo.save()
        Photo.objects.get(pk=photo.pk).save()
    assert callbacks == []
    assert cached_variants(rendered, LANDSCAPE) == 2


def test_creating_a_row_purges_nothing(
    rendered: Path, django_capture_on_commit_callbacks: Capture
) -> None:
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        Photo.objects.create(image=LANDSCAPE)
    assert callbacks == []


def test_deleting_the_row_purges_its_file(
    rendered: Path, django_capture_on_commit_callbacks: Capture
) -> None:
    photo = Photo.objects.create(image=LANDSCAPE)
    with django_capture_on_commit_callbacks(execute=True):
        photo.delete()
    assert cached_variants(rendered, LANDSCAPE) == 0
    assert cache.get(metadata_key(LANDSCAPE)) is None
    assert cached_variants(rendered, ALPHA) == 2


def test_deleting_a_file_named_like_another_source_purges_what_its_tag_wrote(
    media: Path, django_capture_on_commit_callbacks: Capture
) -> None:
    """``other:c.jpg`` in the default storage is written ``:other:c.jpg``; so is its purge."""
    (media / "other:c.jpg").write_bytes((media / LANDSCAPE).read_bytes())
    photo = Photo.objects.create(image="other:c.jpg")
    render(photo.image, "40x40")
    assert cached_variants(media, ":other:c.jpg") == 1
    with django_capture_on_commit_callbacks(execute=True):
        photo.delete()
    assert cached_variants(media, ":other:c.jpg") == 0


def test_queryset_delete_purges_each_row(
    rendered: Path, django_capture_on_commit_callbacks: Capture
) -> None:
    Photo.objects.create(image=LANDSCAPE)
    Photo.objects.create(image=ALPHA)
    with django_capture_on_commit_callbacks(execute=True):
        Photo.objects.all().delete()
    assert cached_variants(rendered, LANDSCAPE) == 0
    assert cached_variants(rendered, ALPHA) == 0


def test_a_new_upload_purges_the_old_file(
    rendered: Path, django_capture_on_commit_callbacks: Capture
) -> None:
    photo = Photo.objects.create(image=LANDSCAPE)
    with django_capture_on_commit_callbacks(execute=True):
        photo.image = ContentFile((rendered / ALPHA).read_bytes(), name="upload.png")
        photo.save()
    assert photo.image.name.startswith("photos/upload")
    assert cached_variants(rendered, LANDSCAPE) == 0


def test_a_new_upload_under_the_same_name_purges_too(
    rendered: Path, django_capture_on_commit_callbacks: Capture
) -> None:
    """An overwriting storage (S3 ``file_overwrite``) would keep the name, not the content."""
    photo = Photo.objects.create(image=LANDSCAPE)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        photo.image = ContentFile((rendered / ALPHA).read_bytes(), name=LANDSCAPE)
        photo.save()
    assert len(callbacks) == 1
    assert cached_variants(rendered, LANDSCAPE) == 0


def test_clearing_the_field_purges_the_old_file(
    rendered: Path, django_capture_on_commit_callbacks: Capture
) -> None:
    photo = Photo.objects.create(image=LANDSCAPE)
    with django_capture_on_commit_callbacks(execute=True):
        photo.image = ""
        photo.save()
    assert cached_variants(rendered, LANDSCAPE) == 0


def test_a_save_of_other_fields_only_does_not_look(
    rendered: Path, django_capture_on_commit_callbacks: Capture
) -> None:
    photo = Photo.objects.create(image=LANDSCAPE)
    photo.image = ALPHA
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        photo.save(update_fields=["title"])
    assert callbacks == []


def test_a_rolled_back_change_purges_nothing(
    rendered: Path, django_capture_on_commit_callbacks: Capture
) -> None:
    photo = Photo.objects.create(image=LANDSCAPE)
    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        photo.image = ALPHA
        photo.save()
        raise RuntimeError("rolled back")
    assert callbacks == []
    assert cached_variants(rendered, LANDSCAPE) == 2


def test_models_without_the_hook_are_left_alone(
    rendered: Path, django_capture_on_commit_callbacks: Capture
) -> None:
    document = Document.objects.create(scan=LANDSCAPE)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        document.scan = ALPHA
        document.save()
        document.delete()
    assert callbacks == []
    assert cached_variants(rendered, LANDSCAPE) == 2


def test_connecting_twice_purges_once(
    rendered: Path, django_capture_on_commit_callbacks: Capture
) -> None:
    purge_on_change(Photo, "image")  # already connected by the test app
    photo = Photo.objects.create(image=LANDSCAPE)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        photo.delete()
    assert len(callbacks) == 1


def test_a_field_of_a_storage_that_is_no_source_is_an_error(media: Path, settings: Any) -> None:
    """Loud at the save, not a silent skip: the hook was asked for, and cannot work."""
    photo = Photo.objects.create(image=LANDSCAPE)
    settings.STORAGES = {
        **settings.STORAGES,
        "other": {"BACKEND": "django.core.files.storage.InMemoryStorage"},
    }
    settings.OXIMG = {**settings.OXIMG, "SOURCE_STORAGE": "other"}
    with pytest.raises(ValueError, match="not an OXIMG source"):
        photo.delete()


@pytest.mark.parametrize(
    ("fields", "message"),
    [(("id",), "not a FileField"), (("nope",), "no field"), ((), "at least one")],
)
def test_purge_on_change_refuses_what_is_not_a_file_field(
    fields: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ImproperlyConfigured, match=message):
        purge_on_change(Photo, *fields)


def test_the_old_module_still_gives_purge_on_change_and_says_where_it_lives() -> None:
    sys.modules.pop("django_oximg.signals", None)
    with pytest.warns(DeprecationWarning, match="import purge_on_change from django_oximg.purge"):
        from django_oximg.signals import purge_on_change as old

    assert old is purge_on_change
