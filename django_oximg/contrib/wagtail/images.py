"""A mixin for a custom Wagtail image model: its renditions are django-oximg URLs.

Wagtail asks the image for its renditions everywhere: its ``{% image %}``,
``srcset_image`` and ``picture`` tags, Jinja2's ``image()``, the StreamField
``ImageBlock`` and ``ImageChooserBlock``, rich-text images, the API's
``ImageRenditionField``, the admin's previews and any code that calls
``image.get_rendition()`` all go through :meth:`get_rendition` or
:meth:`get_renditions`. A custom image model (``WAGTAILIMAGES_IMAGE_MODEL``)
that takes :class:`OximgRenditionsMixin` answers them with
:class:`~django_oximg.contrib.wagtail.renditions.OximgRendition`: a signed
django-oximg URL with the width, height and HTML of Wagtail's rendition, and
no rendition row, no file, no render at page time. Templates keep
``{% load wagtailimages_tags %}``; no template library is replaced, so
Django's check for two libraries under one name (``templates.W003``) has
nothing to say.

Where django-oximg cannot serve a rendition, the image falls back to
Wagtail's own (a row and a file, as without the mixin), so nothing that
worked stops working: an SVG (silently: Wagtail serves SVGs as they are),
and with one WARNING on the ``django_oximg`` logger a filter operation with
no URL option (``format-webp-lossless``, a site's own filter operation), or
a source django-oximg would refuse (its header over ``MAX_SRC_RESOLUTION``,
its file over ``MAX_SRC_FILE_SIZE``, a storage it does not serve). A
missing file raises Wagtail's ``SourceImageIOError``, so Wagtail's tags and
the API show their "not-found" answers, as they do without the mixin.
"""

from __future__ import annotations

from typing import Any

from wagtail.images.models import Filter, SourceImageIOError

from django_oximg import conf, source_metadata
from django_oximg.arguments import ThumbnailError
from django_oximg.contrib.wagtail.renditions import compile_spec, rendition
from django_oximg.core.errors import SourceNotFound
from django_oximg.tag_functions import THUMBNAIL_ERRORS, log_failure

__all__ = ["OximgRenditionsMixin"]


def spec_text(spec: Filter | str) -> str:
    """A filter spec as text, checked by Wagtail (its own error for a bad one)."""
    text = spec if isinstance(spec, str) else spec.spec
    Filter(spec=text).operations  # noqa: B018 - raises InvalidFilterSpecError, as Wagtail does
    return text


def refuse_over_limits(meta: source_metadata.SourceMetadata, file_size: int | None) -> None:
    """:class:`ThumbnailError` for a source the server would refuse (a 422) for its size.

    Its header's resolution against ``MAX_SRC_RESOLUTION``, and its size in
    bytes against ``MAX_SRC_FILE_SIZE``: such an image gets Wagtail's own
    rendition rather than a URL that would fail. The size is Wagtail's
    ``get_file_size()``: recorded at upload, else read from the storage
    once and saved on the image, as Wagtail itself does.
    """
    settings = conf.get_settings()
    pixels = meta.width * meta.height
    if settings.MAX_SRC_RESOLUTION and pixels > settings.MAX_SRC_RESOLUTION:
        raise ThumbnailError(
            f"{meta.width}x{meta.height} is over MAX_SRC_RESOLUTION ({settings.MAX_SRC_RESOLUTION})"
        )
    if settings.MAX_SRC_FILE_SIZE and file_size and file_size > settings.MAX_SRC_FILE_SIZE:
        raise ThumbnailError(
            f"{file_size} bytes is over MAX_SRC_FILE_SIZE ({settings.MAX_SRC_FILE_SIZE})"
        )


class OximgRenditionsMixin:
    """Wagtail's rendition API answered with django-oximg URLs; first in the model's bases.

        class SiteImage(OximgRenditionsMixin, AbstractImage): ...

    :meth:`get_rendition` and :meth:`get_renditions` keep Wagtail's
    signatures (a spec string or a ``Filter``) and answers (a rendition, a
    dict keyed by spec), so every caller of Wagtail's works unchanged.
    """

    def get_rendition(self, filter: Filter | str) -> Any:
        """The rendition for ``filter``: a django-oximg URL, or Wagtail's where none serves it."""
        text = spec_text(filter)
        return self.get_renditions(text)[text]

    def get_renditions(self, *filters: Filter | str) -> dict[str, Any]:
        """The renditions for ``filters``, keyed by spec, the source's header read once."""
        specs = list(dict.fromkeys(spec_text(spec) for spec in filters))
        wagtails: Any = super()  # AbstractImage's, past this mixin
        image: Any = self
        if image.is_svg():
            return dict(wagtails.get_renditions(*specs))
        try:
            source = source_metadata.source_name(image.file)
            meta = source_metadata.source_metadata(source)
            refuse_over_limits(meta, image.get_file_size())
        except SourceNotFound as exc:
            raise SourceImageIOError(str(exc)) from exc
        except THUMBNAIL_ERRORS as exc:
            log_failure(image.file, exc)
            return dict(wagtails.get_renditions(*specs))
        found: dict[str, Any] = {}
        for spec in specs:
            try:
                found[spec] = rendition(image, compile_spec(spec), source, meta)
            except THUMBNAIL_ERRORS as exc:
                log_failure(image.file, exc)
        missing = [spec for spec in specs if spec not in found]
        if missing:
            found.update(wagtails.get_renditions(*missing))
        return {spec: found[spec] for spec in specs}
