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
a source django-oximg refuses (over ``MAX_SRC_RESOLUTION``, in a storage it
does not serve). A missing file raises Wagtail's ``SourceImageIOError``, so
Wagtail's tags and the API show their "not-found" answers, as they do
without the mixin.
"""

from __future__ import annotations

from typing import Any

from wagtail.images.models import Filter, SourceImageIOError

from django_oximg import source_metadata
from django_oximg.contrib.wagtail.renditions import compile_spec, rendition
from django_oximg.core.errors import SourceNotFound
from django_oximg.tag_functions import THUMBNAIL_ERRORS, log_failure

__all__ = ["OximgRenditionsMixin"]


def spec_text(spec: Filter | str) -> str:
    """A filter spec as text, checked by Wagtail (its own error for a bad one)."""
    text = spec if isinstance(spec, str) else spec.spec
    Filter(spec=text).operations  # noqa: B018 - raises InvalidFilterSpecError, as Wagtail does
    return text


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
