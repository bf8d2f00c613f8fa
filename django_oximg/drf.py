"""A Django REST framework serializer field: a thumbnail's URL and size, or a srcset.

    from rest_framework import serializers  # type: ignore[import-untyped]
    from django_oximg.drf import ThumbnailField

    class PhotoSerializer(serializers.ModelSerializer):
        thumbnail = ThumbnailField("400x300", source="image", crop=True, format="webp")
        hero = ThumbnailField("800x450", source="image", widths=[400, 800, 1200], crop=True)

        class Meta:
            model = Photo
            fields = ["id", "title", "thumbnail", "hero"]

``thumbnail`` is ``{"url": ..., "width": 400, "height": 300}``; with
``widths``, ``hero`` also has ``"srcset"`` (the attribute's value) and
``"candidates"`` (each width's url, width and height). The arguments are
``{% thumbnail %}``'s and are checked by the same code when the serializer
class is defined, so a typo fails at import, not in a response. With the
request in the serializer's context (as DRF's generic views put it) the
URLs are absolute. An empty or missing file gives ``null``, logged as the
tags log it (``{% empty %}``). Nothing processes an image here: sizes come
from the source's header, as for the tags.

This is the one module that imports ``rest_framework``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rest_framework import serializers  # type: ignore[import-untyped]

from django_oximg import conf
from django_oximg.arguments import ThumbnailError, check_arguments, geometry_text
from django_oximg.responsive import Srcset, get_srcset, widths_of
from django_oximg.tag_functions import tolerant
from django_oximg.thumbnails import Thumbnail, get_thumbnail

#: Keywords that are the serializer field's own, not the thumbnail's.
FIELD_KEYWORDS = frozenset(
    {
        "source",
        "label",
        "help_text",
        "style",
        "error_messages",
        "allow_null",
        "default",
        "required",
        "initial",
    }
)


class ThumbnailField(serializers.Field):  # type: ignore[misc]
    """A read-only field giving a thumbnail of an ``ImageField`` (or a storage name).

    ``geometry`` and the keywords are :func:`~django_oximg.thumbnails.get_thumbnail`'s
    (``crop``, ``format``, ``quality``, ``upscale``, ``preset``, ``focal_point``,
    ...); ``widths`` (a list, "320,640" or a name in ``OXIMG["SRCSET_WIDTHS"]``)
    makes it a srcset of :func:`~django_oximg.responsive.get_srcset`. DRF's own
    keywords (``source``, ``label``, ``help_text``, ...) are DRF's.
    """

    def __init__(self, geometry: Any = "", *, widths: Any = None, **kwargs: Any) -> None:
        field_kwargs = {name: kwargs.pop(name) for name in FIELD_KEYWORDS if name in kwargs}
        field_kwargs["read_only"] = True
        self.geometry = geometry_text(geometry)
        self.widths = widths
        self.thumbnail_options: Mapping[str, Any] = kwargs
        try:
            settings = conf.get_settings()
            check_arguments(
                self.geometry, kwargs, kwargs, settings.PRESETS, extensions=settings.EXTENSIONS
            )
            if widths is not None:
                if "dpr" in kwargs:
                    raise ThumbnailError("srcset: dpr is not allowed; the w descriptors cover it")
                widths_of(widths)
        except ThumbnailError as exc:
            raise ThumbnailError(f"ThumbnailField: {exc}") from None
        super().__init__(**field_kwargs)

    def to_representation(self, value: Any) -> dict[str, Any] | None:
        absolute = self.absolute_url()
        options = dict(self.thumbnail_options)
        if self.widths is None:
            thumbnail = tolerant(
                lambda: get_thumbnail(value, self.geometry, **options), value, None
            )
            return None if thumbnail is None else size_of(thumbnail, absolute)
        srcset: Srcset | None = tolerant(
            lambda: get_srcset(value, self.geometry, self.widths, **options), value, None
        )
        if srcset is None:
            return None
        candidates = [size_of(candidate, absolute) for candidate in srcset.candidates]
        return {
            **size_of(srcset.default, absolute),
            "srcset": ", ".join(f"{c['url']} {c['width']}w" for c in candidates),
            "candidates": candidates,
        }

    def absolute_url(self) -> Callable[[str], str]:
        """Makes a URL absolute with the context's request; unchanged without one."""
        request = self.context.get("request") if getattr(self, "parent", None) else None
        if request is None:
            return str
        return request.build_absolute_uri  # type: ignore[no-any-return]


def size_of(thumbnail: Thumbnail, absolute: Callable[[str], str]) -> dict[str, Any]:
    """A thumbnail as the API gives it: ``url``, ``width`` and ``height``."""
    return {"url": absolute(thumbnail.url), "width": thumbnail.width, "height": thumbnail.height}
