"""django-oscar's product images served by django-oximg: one setting, no thumbnail files.

django-oscar renders every product image through ``{% oscar_thumbnail %}``,
which calls the class named by ``OSCAR_THUMBNAILER`` (Oscar ships
``oscar.core.thumbnails.SorlThumbnail``, its default, and
``EasyThumbnails``). The two classes here have the same names and the same
interface, so a shop switches by changing the module in that setting::

    OSCAR_THUMBNAILER = "django_oximg.contrib.oscar.SorlThumbnail"

``generate_thumbnail(source, **options)`` gives a signed URL and the size the
image will have (a :class:`~django_oximg.thumbnails.Thumbnail`: ``url``,
``width``, ``height``, and sorl-thumbnail's ``x``, ``y``, ``size``,
``ratio``), computed from the source's header with the arithmetic of the
package the shop used (``sizing``) and that package's defaults (sorl-thumbnail
enlarges small images unless told ``upscale=False``; easy-thumbnails never
does unless told ``upscale=True``); nothing is rendered while the page
renders. ``delete_thumbnails(source)``, which Oscar calls when a product
image or a category is deleted (``OSCAR_DELETE_IMAGE_FILES``), purges the
source's cached results and deletes the file, as both of Oscar's classes
do.

Nothing here imports Oscar: the module is imported only by the shops whose
setting names it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from typing import Any, ClassVar

from django.conf import settings
from django.core.files import File
from django.core.files.storage import Storage, default_storage

from django_oximg import conf
from django_oximg.purge import purge_source
from django_oximg.source_metadata import source_name
from django_oximg.thumbnails import Thumbnail, get_thumbnail

__all__ = ["EasyThumbnails", "SorlThumbnail"]


class SorlThumbnail:
    """``OSCAR_THUMBNAILER`` for a shop on Oscar's default, sorl-thumbnail.

    Sizes are sorl-thumbnail's (``sizing="sorl"``), and a thumbnail is
    enlarged to its box unless the template says ``upscale=False``, as
    sorl-thumbnail's default ``THUMBNAIL_UPSCALE`` does. ``OXIMG["TAG_DEFAULTS"]``
    overrides these defaults; the template's own options override both.
    """

    #: The keywords a template's options and ``TAG_DEFAULTS`` leave unset.
    defaults: ClassVar[Mapping[str, Any]] = {"sizing": "sorl", "upscale": True}

    def generate_thumbnail(self, source: Any, **options: Any) -> Thumbnail:
        """The thumbnail of ``source`` for ``{% oscar_thumbnail source "WxH" ... %}``.

        ``options`` are the tag's: ``size`` ("WxH", "W", "Wx" or "xH") and
        keywords such as ``crop``, ``upscale``, ``quality`` and ``format``,
        which mean what they mean to ``{% thumbnail %}``. A keyword the tags
        do not know raises :class:`~django_oximg.thumbnails.ThumbnailError`
        with what to write instead; Oscar's tag logs it and prints nothing
        (or raises, with ``OSCAR_THUMBNAIL_DEBUG``).
        """
        geometry = str(options.pop("size", "") or "").removesuffix("x")
        keywords = {**self.defaults, **conf.get_settings().TAG_DEFAULTS, **options}
        return get_thumbnail(shown_source(source), geometry, **keywords)

    def delete_thumbnails(self, source: Any) -> None:
        """Purge ``source``'s cached results and metadata, then delete the file.

        Oscar calls this for every image field of a deleted product image or
        category, and relies on it to delete the original too (its
        sorl-thumbnail and easy-thumbnails classes both do). An empty field
        has nothing to delete.
        """
        name = str(getattr(source, "name", "") or "")
        if not name:
            return
        purge_source(source_name(source))
        storage: Storage = getattr(source, "storage", None) or default_storage
        storage.delete(name)


class EasyThumbnails(SorlThumbnail):
    """``OSCAR_THUMBNAILER`` for a shop that used Oscar's ``EasyThumbnails``.

    Sizes are easy-thumbnails' (``sizing="easy-thumbnails"``), and nothing
    is enlarged unless the template says ``upscale=True``, as in
    easy-thumbnails.
    """

    defaults: ClassVar[Mapping[str, Any]] = {"sizing": "easy-thumbnails", "upscale": False}


def shown_source(source: Any) -> Any:
    """What :func:`~django_oximg.thumbnails.get_thumbnail` takes for one of Oscar's sources.

    A file field's file and a storage name are taken as they are. For a
    product without images Oscar gives the name ``OSCAR_MISSING_IMAGE_URL``
    ("image_not_found.jpg"), which it makes a symlink in the media root to
    the picture in its static files. The source jail refuses a symlink that
    leads out of the storage's root, so that one is replaced by a copy of
    the file it points to (what Oscar's documentation asks of shops whose
    media are not on local disk). Oscar's setting is read here, where Oscar
    reads it, not in :mod:`django_oximg.conf`.
    """
    name = source if isinstance(source, str) else None
    if name is None and not isinstance(source, File):
        name = getattr(source, "name", None)  # Oscar's MissingProductImage
    if name and name == getattr(settings, "OSCAR_MISSING_IMAGE_URL", None):
        copy_linked_file(default_storage, name)
    return source if name is None else name


def copy_linked_file(storage: Storage, name: str) -> None:
    """Replace ``name``, a symlink out of ``storage``'s root, by a copy of its target.

    A storage without local paths, and a name that is no symlink or leads
    to a file inside the root, are left alone. The copy is written beside
    the link and renamed over it, so no request sees half a file.
    """
    try:
        path = storage.path(name)
        root = os.path.realpath(storage.path(""))
    except NotImplementedError:
        return
    if not os.path.islink(path):
        return
    target = os.path.realpath(path)
    if target.startswith(root + os.sep) or not os.path.isfile(target):
        return
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".oximg-")
    try:
        with os.fdopen(handle, "wb") as copy, open(target, "rb") as original:
            shutil.copyfileobj(original, copy)
        os.chmod(temporary, 0o644)  # as a file the storage saves
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
