"""Responsive images: one geometry at several widths, in several formats.

:func:`get_srcset` gives the candidates of an ``srcset`` attribute (``url Nw``)
and :func:`get_picture` the sources of a ``<picture>`` element: AVIF and WebP
``<source>`` elements and a fallback ``<img>`` in the source's own format,
with the intrinsic ``width``/``height`` of the default size so the page does
not shift while images load.

The geometry fixes the shape: every candidate has its aspect ratio, scaled to
the candidate's width. Nothing here processes an image: every candidate is a
:func:`~django_oximg.thumbnails.thumbnail_for` over the source's metadata,
read once (from Django's cache) per source, whatever the number of sizes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from django_oximg import conf
from django_oximg.arguments import (
    ThumbnailError,
    crop_gravity,
    flag,
    output_format,
    parse_geometry,
    tag_options,
)
from django_oximg.core.keys import CONTENT_TYPES
from django_oximg.core.options.geometry import round_half_up
from django_oximg.source_metadata import SourceMetadata, source_metadata, source_name
from django_oximg.thumbnails import Thumbnail, resolve_arguments, thumbnail_for

#: Formats a ``<picture>`` offers before its fallback, best compression first.
MODERN_FORMATS = ("avif", "webp")

#: Formats that keep an animation; a GIF fallback gets no AVIF source, which
#: would show the first frame only.
ANIMATED_FORMATS = frozenset({"gif", "webp"})

#: The placeholder: a tiny, blurred, low-quality WebP that the browser
#: stretches behind the ``<img>`` until the real image arrives (a few hundred
#: bytes; 16 px keeps the colours and rough shapes, nothing more).
PLACEHOLDER_WIDTH = 16
PLACEHOLDER_OPTIONS: Mapping[str, Any] = {
    "format": "webp",
    "quality": 30,
    "blur": 1,
    "upscale": True,
}

#: Keywords of the image that a placeholder shares: those that change what
#: is shown, not how it is encoded.
PLACEHOLDER_SHARED = ("crop", "focal_point", "background", "options", "preset")

#: ``<img>`` attributes :func:`picture_html` accepts, in the order written.
IMG_ATTRIBUTES = ("alt", "class", "id", "title", "loading", "decoding", "fetchpriority", "style")

#: Attribute defaults: decorative unless described, off-screen images load
#: when scrolled near, decoding off the main thread. Pass loading="eager"
#: (and fetchpriority="high") for the image that is the page's largest paint.
IMG_DEFAULTS: Mapping[str, str] = {"alt": "", "loading": "lazy", "decoding": "async"}

#: Characters kept as they are in a ``url("...")`` CSS string; anything else
#: (quotes, backslashes, newlines) is percent-encoded so it cannot end it.
CSS_URL_SAFE = "/:@!$&'()*+,;=-._~%?#"


@dataclass(frozen=True)
class Srcset:
    """Thumbnails of one source at several widths, and the default size.

    ``str()`` is the ``srcset`` attribute value; ``url``, ``width`` and
    ``height`` are those of the default size, for ``src`` and the intrinsic
    size of the ``<img>``.
    """

    default: Thumbnail
    #: Distinct output widths, narrowest first; the default is one of them.
    candidates: tuple[Thumbnail, ...]

    @property
    def url(self) -> str:
        return self.default.url

    @property
    def width(self) -> int:
        return self.default.width

    @property
    def height(self) -> int:
        return self.default.height

    @property
    def format(self) -> str:
        return self.default.format

    @property
    def srcset(self) -> str:
        return ", ".join(f"{candidate.url} {candidate.width}w" for candidate in self.candidates)

    def __str__(self) -> str:
        return self.srcset


@dataclass(frozen=True)
class Picture:
    """What a ``<picture>`` element shows: modern formats first, then the fallback."""

    #: One srcset per modern format, in the order the browser should prefer.
    sources: tuple[Srcset, ...]
    #: The ``<img>``: the source's own format (or the ``format`` asked for).
    fallback: Srcset
    #: A tiny blurred thumbnail shown behind the image while it loads.
    placeholder: Thumbnail | None = None

    @property
    def width(self) -> int:
        return self.fallback.width

    @property
    def height(self) -> int:
        return self.fallback.height


@dataclass(frozen=True)
class Plan:
    """The sizes of one responsive image: what every format's srcset is made of."""

    source: str
    metadata: SourceMetadata
    #: The geometry of the ``src``/intrinsic size, first, then one per width.
    geometries: tuple[str, ...]


def get_srcset(source: Any, geometry: str, widths: Any = None, **kwargs: Any) -> Srcset:
    """The srcset of ``source`` at ``widths``, in the shape of ``geometry``.

    ``widths``: a name in ``OXIMG["SRCSET_WIDTHS"]``, a list of integers or a
    string such as "320,640,960"; ``None`` takes the ``default`` list. Other
    keywords are :func:`~django_oximg.thumbnails.get_thumbnail`'s, except
    ``dpr`` (``w`` descriptors already cover screen density).
    """
    geometry, kwargs = resolve_arguments(source, geometry, kwargs)
    plan = plan_sizes(source, geometry, widths, kwargs)
    return srcset_of(plan, kwargs)


def get_picture(
    source: Any,
    geometry: str,
    widths: Any = None,
    formats: Any = MODERN_FORMATS,
    placeholder: Any = False,
    **kwargs: Any,
) -> Picture:
    """The srcsets of a ``<picture>``: one per format in ``formats`` and the fallback.

    ``formats`` ("avif,webp" or a list) are offered in that order, except
    those this libvips cannot encode, the fallback's own format, and AVIF
    for a GIF (AVIF output is never animated). ``format`` names the
    fallback's format ("auto" and "best" are refused: the ``<source>`` elements are the
    negotiation). ``placeholder`` adds a tiny blurred thumbnail, except behind
    an image with alpha (:func:`covers_its_box`).
    """
    geometry, kwargs = resolve_arguments(source, geometry, kwargs)
    if str(kwargs.get("format", "")).lower() in ("auto", "best"):
        raise ThumbnailError(
            "picture: format='auto' and 'best' are what the <source> elements do; omit it"
        )
    plan = plan_sizes(source, geometry, widths, kwargs)
    fallback = srcset_of(plan, kwargs)
    sources = tuple(
        srcset_of(plan, {**kwargs, "format": fmt})
        for fmt in picture_formats(formats, fallback.format)
    )
    wanted = flag("placeholder", placeholder)
    tiny = placeholder_of(plan, kwargs) if wanted and covers_its_box(plan, kwargs) else None
    return Picture(sources=sources, fallback=fallback, placeholder=tiny)


def plan_sizes(source: Any, geometry: str, widths: Any, kwargs: Mapping[str, Any]) -> Plan:
    """Check the arguments, read the source's metadata once, list the geometries."""
    if "dpr" in kwargs:
        raise ThumbnailError("srcset: dpr is not allowed; the w descriptors cover it")
    box = parse_geometry(geometry)
    requested = widths_of(widths)
    source_string = source_name(source)
    # A bad keyword fails before any read.
    tag_options(str(geometry), dict(kwargs), conf.get_settings().EXTENSIONS)
    metadata = source_metadata(source_string)
    widest = widest_keeping_shape(metadata, box, kwargs)
    default_width = box[0] if widest is None or box[0] <= widest else widest
    geometries = [str(geometry) if default_width == box[0] else geometry_at(default_width, box)]
    for width in requested:
        geometries.append(geometry_at(width if widest is None else min(width, widest), box))
    return Plan(source_string, metadata, tuple(dict.fromkeys(geometries)))


def widths_of(widths: Any) -> tuple[int, ...]:
    """The requested widths: a named list, a literal list or "320,640"; sorted, distinct."""
    if widths is None or widths == "":
        widths = "default"
    if isinstance(widths, str) and not widths.strip()[:1].isdigit():
        named = conf.get_settings().SRCSET_WIDTHS
        if widths.strip() not in named:
            raise ThumbnailError(
                f"unknown widths {widths!r}: use a list such as '320,640' "
                f"or a name in OXIMG['SRCSET_WIDTHS'] ({', '.join(sorted(named))})"
            )
        return named[widths.strip()]
    items: Iterable[Any] = widths.replace(",", " ").split() if isinstance(widths, str) else widths
    try:
        parsed = {int(item) for item in items}
    except (TypeError, ValueError) as exc:
        raise ThumbnailError(f"bad widths {widths!r}: use positive integers") from exc
    if not parsed or min(parsed) <= 0:
        raise ThumbnailError(f"bad widths {widths!r}: use positive integers")
    return tuple(sorted(parsed))


def widest_keeping_shape(
    metadata: SourceMetadata, box: tuple[int, int], kwargs: Mapping[str, Any]
) -> int | None:
    """The widest candidate a crop can fill without enlarging, or None for no limit.

    Without ``upscale`` a crop box larger than the source is cut to the
    source's size, which changes its aspect ratio; the largest box of the
    geometry's shape that fits in the source keeps it. Fitting (no crop) and
    width- or height-only geometries keep the source's shape by themselves.
    """
    width, height = box
    cropped = crop_gravity(kwargs.get("crop")) is not None
    if not cropped or not (width and height) or flag("upscale", kwargs.get("upscale")):
        return None
    source_width, source_height = metadata.upright_size
    return max(1, min(source_width, math.floor(source_height * width / height)))


def geometry_at(width: int, box: tuple[int, int]) -> str:
    """The geometry of ``box``'s shape at ``width`` ("W" when the box sets one side)."""
    box_width, box_height = box
    if not (box_width and box_height):
        return str(width)
    return f"{width}x{max(1, round_half_up(width * box_height / box_width))}"


def srcset_of(plan: Plan, kwargs: Mapping[str, Any]) -> Srcset:
    """Every geometry of ``plan`` as a thumbnail; one candidate per output width."""
    thumbnails = [
        thumbnail_for(plan.source, geometry, dict(kwargs), plan.metadata)
        for geometry in plan.geometries
    ]
    by_width: dict[int, Thumbnail] = {}
    for thumbnail in thumbnails:
        by_width.setdefault(thumbnail.width, thumbnail)  # the default wins a tie
    candidates = tuple(by_width[width] for width in sorted(by_width))
    return Srcset(default=thumbnails[0], candidates=candidates)


def picture_formats(formats: Any, fallback_format: str) -> tuple[str, ...]:
    """The ``<source>`` formats to offer, in order (see :func:`get_picture`).

    Whether this libvips can encode a format is libvips' to say, so
    ``{% picture %}`` (alone among the tags) loads libvips, once per process.
    """
    from django_oximg.core import pipeline

    names = formats.replace(",", " ").split() if isinstance(formats, str) else list(formats)
    chosen: list[str] = []
    for name in names:
        fmt = output_format(name)
        if not fmt:
            raise ThumbnailError("picture: 'auto' is not a <source> format")
        if fmt == fallback_format or fmt in chosen:
            continue
        if fallback_format in ANIMATED_FORMATS and fmt not in ANIMATED_FORMATS:
            continue
        if pipeline.saver_available(fmt):
            chosen.append(fmt)
    return tuple(chosen)


def covers_its_box(plan: Plan, kwargs: Mapping[str, Any]) -> bool:
    """Whether the image hides whatever is behind it: no alpha, or alpha flattened.

    The placeholder stays behind the ``<img>`` after it loads (no script
    takes it away), so behind a source with alpha it would show through the
    transparent pixels for good: its blurred, stretched edge a halo around
    the subject. Such an image gets none, unless ``background`` (or
    ``padding``, which sets one) flattens its alpha. The header says whether
    the source has alpha (:class:`~django_oximg.source_metadata.SourceMetadata`).
    """
    if not plan.metadata.alpha:
        return True
    options = tag_options("1", dict(kwargs), conf.get_settings().EXTENSIONS)
    return options.background is not None


def placeholder_of(plan: Plan, kwargs: Mapping[str, Any]) -> Thumbnail:
    """A ``PLACEHOLDER_WIDTH`` wide thumbnail of the same crop, blurred and cheap."""
    box = parse_geometry(plan.geometries[0])
    shared = {name: kwargs[name] for name in PLACEHOLDER_SHARED if name in kwargs}
    geometry = geometry_at(PLACEHOLDER_WIDTH, box) if box[0] else str(PLACEHOLDER_WIDTH)
    return thumbnail_for(plan.source, geometry, {**shared, **PLACEHOLDER_OPTIONS}, plan.metadata)


# -- markup ------------------------------------------------------------------------


def default_sizes(width: int) -> str:
    """``sizes`` for an image shown at its intrinsic width, but never wider than the screen."""
    return f"(max-width: {width}px) 100vw, {width}px"


def srcset_attributes(srcset: Srcset, sizes: str) -> SafeString:
    """``srcset="..." sizes="..."``, escaped."""
    return format_html('srcset="{}" sizes="{}"', srcset.srcset, sizes)


def picture_html(
    picture: Picture, sizes: str = "", attrs: Mapping[str, Any] | None = None
) -> SafeString:
    """The ``<picture>`` element, every value escaped.

    ``attrs`` are ``<img>`` attributes from :data:`IMG_ATTRIBUTES` (``None``
    or ``False`` leaves one out); ``sizes`` defaults to
    :func:`default_sizes` of the intrinsic width.
    """
    sizes = str(sizes or default_sizes(picture.width))
    values = img_attributes(picture, attrs or {})
    sources = format_html_join(
        "",
        '<source type="{}" {}>',
        (
            (CONTENT_TYPES[srcset.format], srcset_attributes(srcset, sizes))
            for srcset in picture.sources
        ),
    )
    extra = format_html_join("", ' {}="{}"', values.items())
    fallback = picture.fallback
    return format_html(
        '<picture>{}<img src="{}" {} width="{}" height="{}"{}></picture>',
        sources,
        fallback.url,
        srcset_attributes(fallback, sizes),
        fallback.width,
        fallback.height,
        extra,
    )


def img_attributes(picture: Picture, attrs: Mapping[str, Any]) -> dict[str, str]:
    """The ``<img>`` attributes besides src/srcset/sizes/width/height, in a fixed order."""
    unknown = set(attrs) - set(IMG_ATTRIBUTES)
    if unknown:
        raise ThumbnailError(
            f"picture: unknown attribute(s) {', '.join(sorted(unknown))}; "
            f"use {', '.join(IMG_ATTRIBUTES)}"
        )
    merged = {**IMG_DEFAULTS, **attrs}
    if picture.placeholder is not None:
        style = placeholder_style(picture.placeholder)
        merged["style"] = f"{style};{merged['style']}" if merged.get("style") else style
    return {
        name: str(merged[name])
        for name in IMG_ATTRIBUTES
        if merged.get(name) is not None and merged.get(name) is not False
    }


def placeholder_style(placeholder: Thumbnail) -> str:
    """CSS that shows ``placeholder`` stretched over the image box until it loads."""
    url = quote(placeholder.url, safe=CSS_URL_SAFE)
    return f'background-image:url("{url}");background-size:cover;background-position:center'
