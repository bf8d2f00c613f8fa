"""Wagtail filter specs as signed django-oximg URLs, sized as Wagtail's renditions.

Wagtail makes a rendition by running its filter's *transform* operations
(``fill``, ``max``, ``width``, ...) over an :class:`ImageTransform` of the
upright image, which yields a crop rectangle and an output size without
touching a pixel; then it crops, resizes, applies the *filter* operations
(``format``, ``jpegquality``, ``bgcolor``, ...) and saves a file and a row.
Here the same transform is computed by Wagtail's own code (so focal points,
``fill``'s crop closeness and every rounding are Wagtail's), and the crop
and size go into a URL as an exact ``crop`` and a ``force`` resize, with
``enlarge`` (``scale-150`` enlarges): the served image has exactly the size
of Wagtail's rendition. The page request writes no rendition row, renders
nothing and reads only the source's first kilobytes (once, then its
metadata is cached as for ``{% thumbnail %}``).

The output format follows Wagtail's rules: ``format-`` if given, else the
source's format after Wagtail's default conversions (BMP to PNG, HEIC to
JPEG) and ``WAGTAILIMAGES_FORMAT_CONVERSIONS``; a GIF stays a GIF (Wagtail
makes a still GIF a PNG, which would need the frame count to decide).
``jpegquality-``, ``webpquality-`` and ``avifquality-`` apply to their
format, as in Wagtail; without them ``WAGTAILIMAGES_JPEG_QUALITY`` (and
the WebP and AVIF ones) apply when the site sets them, else ``OXIMG``'s
``QUALITY``. Wagtail's own settings are read here, where Wagtail reads
them, not in :mod:`django_oximg.conf`, which has no business knowing them.
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from wagtail.images.exceptions import InvalidFilterSpecError
from wagtail.images.image_operations import (
    AvifQualityOperation,
    BackgroundColorOperation,
    DoNothingOperation,
    FormatOperation,
    JPEGQualityOperation,
    TransformOperation,
    WebPQualityOperation,
)
from wagtail.images.models import AbstractRendition, Filter

from django_oximg import source_metadata, thumbnails
from django_oximg.arguments import ThumbnailError
from django_oximg.core.options import OUTPUT_FORMATS

__all__ = ["OximgRendition", "Spec", "compile_spec", "get_rendition", "get_renditions"]

#: Wagtail's default output-format conversions (``Filter.run``), GIF left out.
DEFAULT_CONVERSIONS = {"bmp": "png", "heic": "jpeg"}

#: Source file extensions and the format name Wagtail (Willow) gives their content.
EXTENSION_FORMATS = {
    "jpg": "jpeg",
    "jpeg": "jpeg",
    "png": "png",
    "gif": "gif",
    "webp": "webp",
    "avif": "avif",
    "heic": "heic",
    "heif": "heic",
    "bmp": "bmp",
    "tif": "tiff",
    "tiff": "tiff",
    "svg": "svg",
}

#: The quality operations, and the output format each applies to.
QUALITY_OPERATIONS = {
    JPEGQualityOperation: "jpeg",
    WebPQualityOperation: "webp",
    AvifQualityOperation: "avif",
}

#: Wagtail's quality settings, by output format.
QUALITY_SETTINGS = {
    "jpeg": "WAGTAILIMAGES_JPEG_QUALITY",
    "webp": "WAGTAILIMAGES_WEBP_QUALITY",
    "avif": "WAGTAILIMAGES_AVIF_QUALITY",
}


@dataclass(frozen=True)
class Spec:
    """A filter spec, checked: Wagtail's :class:`Filter` and what its filter operations ask."""

    #: The spec as Wagtail writes it (operations joined by ``|``).
    text: str
    filter: Any
    #: ``format-``'s format, or "" for the source's (after the conversions).
    format: str
    #: ``jpegquality-`` and friends: output format -> quality.
    quality: Mapping[str, int]
    #: ``bgcolor-`` as "rrggbb", or "".
    background: str


@functools.lru_cache(maxsize=1024)
def compile_spec(text: str) -> Spec:
    """``text`` checked and taken apart, or :class:`ThumbnailError` saying what is wrong.

    Wagtail builds the operations (so its registered ones, and its own
    messages for a bad argument); transform operations are all served, as
    their result is a rectangle and a size whatever they compute. Filter
    operations other than Wagtail's format, quality and background ones
    change pixels in ways no URL option says, and are refused.
    """
    spec_filter = Filter(spec=text)
    try:
        operations = spec_filter.operations
    except InvalidFilterSpecError as exc:
        raise ThumbnailError(f"bad image filter spec {text!r}: {exc}") from exc
    fmt, quality, background = "", {}, ""
    for operation in operations:
        if isinstance(operation, TransformOperation | DoNothingOperation):
            continue
        if isinstance(operation, FormatOperation):
            if operation.format not in OUTPUT_FORMATS:
                choices = ", ".join(f"format-{name}" for name in OUTPUT_FORMATS)
                raise ThumbnailError(
                    f"{text!r}: format-{operation.format} is not served; {choices}"
                )
            if operation.options:
                options = "-".join(operation.options)
                raise ThumbnailError(f"{text!r}: format-{operation.format}-{options} is not served")
            fmt = operation.format
        elif type(operation) in QUALITY_OPERATIONS:
            quality[QUALITY_OPERATIONS[type(operation)]] = operation.quality
        elif isinstance(operation, BackgroundColorOperation):
            background = "".join(f"{int(channel):02x}" for channel in operation.color[:3])
        else:
            name = operation.method
            raise ThumbnailError(f"{text!r}: the {name!r} operation has no django-oximg equivalent")
    return Spec(text, spec_filter, fmt, quality, background)


def output_format(spec: Spec, source: str) -> str:
    """The format Wagtail would save ``source`` in for ``spec`` (see the module's notes)."""
    if spec.format:
        return spec.format
    extension = posixpath.splitext(source)[1][1:].lower()
    original = EXTENSION_FORMATS.get(extension, "jpeg")
    conversions = {
        **DEFAULT_CONVERSIONS,
        **getattr(settings, "WAGTAILIMAGES_FORMAT_CONVERSIONS", {}),
    }
    fmt = conversions.get(original, original)
    if fmt not in OUTPUT_FORMATS:
        raise ThumbnailError(f"{source!r}: no django-oximg output format for {fmt} sources")
    return str(fmt)


def quality_for(spec: Spec, fmt: str) -> int | None:
    """The spec's quality for ``fmt``, else Wagtail's setting if the site sets it, else None."""
    if fmt in spec.quality:
        return spec.quality[fmt]
    name = QUALITY_SETTINGS.get(fmt)
    value = getattr(settings, name, None) if name else None
    return int(value) if value is not None else None


class OximgRendition:
    """What a template gets of a rendition: ``url``, ``width``, ``height``, ``alt``, ``attrs``...

    Wagtail's rendition API as its templates use it, with no row and no
    file behind it. The HTML comes from Wagtail's own rendition methods
    (``img_tag`` with the images app's ``default_attrs``, ``attrs``,
    ``full_url`` with ``WAGTAILADMIN_BASE_URL``, the background position),
    borrowed from :class:`AbstractRendition`, which read only what is here.
    """

    def __init__(self, image: Any, spec: Spec, thumbnail: thumbnails.Thumbnail, transform: Any):
        self.image = image
        self.filter_spec = spec.text
        self.thumbnail = thumbnail
        self.transform = transform

    @property
    def url(self) -> str:
        return self.thumbnail.url

    @property
    def width(self) -> int:
        return self.thumbnail.width

    @property
    def height(self) -> int:
        return self.thumbnail.height

    @property
    def filter(self) -> Any:
        return compile_spec(self.filter_spec).filter

    @functools.cached_property
    def focal_point(self) -> Any:
        """The image's focal point in this rendition's pixels, or None."""
        point = self.image.get_focal_point()
        return point.transform(self.transform) if point else None

    alt = AbstractRendition.alt
    attrs = AbstractRendition.attrs
    attrs_dict = AbstractRendition.attrs_dict
    full_url = AbstractRendition.full_url
    background_position_style = AbstractRendition.background_position_style
    background_position_x = AbstractRendition.background_position_x
    background_position_y = AbstractRendition.background_position_y
    img_tag = AbstractRendition.img_tag
    __html__ = AbstractRendition.__html__

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"<OximgRendition {self.filter_spec!r} {self.width}x{self.height} {self.url}>"


def get_rendition(image: Any, spec: str) -> OximgRendition:
    """The rendition of ``image`` (a Wagtail image) for filter spec ``spec``, as a URL.

    Raises :class:`ThumbnailError` for a spec or image that cannot be
    served and the core's ``OximgError`` subclasses for a source that is
    missing (``SourceNotFound``) or not an image.
    """
    return get_renditions(image, [spec])[spec]


def get_renditions(image: Any, specs: Iterable[str]) -> dict[str, OximgRendition]:
    """:func:`get_rendition` for several specs, the source's header read once."""
    if image.is_svg():
        raise ThumbnailError(f"{image.file.name!r}: SVG images are not served by django-oximg")
    source = source_metadata.source_name(image.file)
    meta = source_metadata.source_metadata(source)
    return {spec: rendition(image, compile_spec(spec), source, meta) for spec in specs}


def rendition(
    image: Any, spec: Spec, source: str, meta: source_metadata.SourceMetadata
) -> OximgRendition:
    """The URL of Wagtail's crop and size for ``spec``: an exact ``crop``, a ``force`` resize.

    The transform is Wagtail's, of the upright source (``Filter.run``
    auto-orients before it transforms). Its rectangle, rounded outwards as
    Wagtail rounds it, is cut with north-west gravity at pixel offsets; a
    rectangle that is the whole image needs no crop.
    """
    width, height = meta.upright_size
    transform = spec.filter.get_transform(image, (width, height))
    rect = transform.get_rect().round()
    left, top = max(int(rect.left), 0), max(int(rect.top), 0)
    right, bottom = min(int(rect.right), width), min(int(rect.bottom), height)
    out_width, out_height = (int(side) for side in transform.size)
    raw = ["rt:force"]
    if (left, top, right, bottom) != (0, 0, width, height):
        raw.append(f"c:{right - left}:{bottom - top}:nowe:{left}:{top}")
    fmt = output_format(spec, source)
    kwargs: dict[str, Any] = {"upscale": True, "options": "/".join(raw), "format": fmt}
    quality = quality_for(spec, fmt)
    if quality:
        kwargs["quality"] = quality
    if spec.background:
        kwargs["background"] = spec.background
    # thumbnail_for, not get_thumbnail: TAG_DEFAULTS (a crop, a sizing) are
    # for {% thumbnail %}; here Wagtail's spec says everything.
    thumbnail = thumbnails.thumbnail_for(source, f"{out_width}x{out_height}", kwargs, meta)
    if (thumbnail.width, thumbnail.height) != (out_width, out_height):
        raise ThumbnailError(
            f"{spec.text!r} of {source!r}: the server would make "
            f"{thumbnail.width}x{thumbnail.height}, Wagtail {out_width}x{out_height} "
            "(a 'default' preset or MAX_RESULT_DIMENSION changes the size)"
        )
    return OximgRendition(image, spec, thumbnail, transform)
