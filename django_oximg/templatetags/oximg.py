"""``{% thumbnail %}`` in sorl-thumbnail's syntax, and responsive images.

    {% load oximg %}
    {% thumbnail photo.image "400x300" crop="center" format="webp" as t %}
      <img src="{{ t.url }}" width="{{ t.width }}" height="{{ t.height }}" alt="">
    {% empty %}
      <p>No image.</p>
    {% endthumbnail %}

    <img src="{% thumbnail photo.image "200" %}" alt="">   {# prints the URL #}

    <img src="{% thumbnail_url photo.image "200" format="webp" %}" alt="">

    <img srcset="{% thumbnail_srcset photo.image "400x300" widths="320,640" %}" ...>

    {% picture photo.image "800x600" widths="400,800,1200" crop="smart" alt="..." %}

The tags compute a URL and a size; they never process an image. An error a
bad argument or source can cause (``ThumbnailError``, ``OximgError``) raises
when ``DEBUG`` is on, so it is seen; otherwise it is logged with its
traceback and the ``{% empty %}`` branch (or nothing) is rendered. Any other
exception is a bug and always propagates. Printed URLs are HTML-escaped
unless autoescaping is off.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from django import template
from django.conf import settings
from django.template.base import FilterExpression, NodeList, Parser, Token
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString

from django_oximg.core.errors import OximgError
from django_oximg.responsive import (
    IMG_ATTRIBUTES,
    MODERN_FORMATS,
    Srcset,
    get_picture,
    get_srcset,
    picture_html,
)
from django_oximg.thumbnails import Thumbnail, ThumbnailError, get_thumbnail

register = template.Library()
logger = logging.getLogger("django_oximg")

#: What a failing thumbnail may raise; anything else is a bug and propagates.
THUMBNAIL_ERRORS = (ThumbnailError, OximgError)

Built = TypeVar("Built")


class ThumbnailNode(template.Node):
    def __init__(
        self,
        source: FilterExpression,
        geometry: FilterExpression,
        kwargs: dict[str, FilterExpression],
        as_var: str | None,
        nodelist: NodeList | None,
        nodelist_empty: NodeList | None,
    ) -> None:
        self.source = source
        self.geometry = geometry
        self.kwargs = kwargs
        self.as_var = as_var
        self.nodelist = nodelist
        self.nodelist_empty = nodelist_empty

    def thumbnail(self, context: template.Context) -> Thumbnail | None:
        source = self.source.resolve(context)
        geometry = self.geometry.resolve(context)
        kwargs = {name: value.resolve(context) for name, value in self.kwargs.items()}
        return thumbnail_or_none(source, geometry, kwargs)

    def render(self, context: template.Context) -> str:
        thumbnail = self.thumbnail(context)
        if self.as_var is None:
            url = thumbnail.url if thumbnail else ""
            return str(conditional_escape(url)) if context.autoescape else url
        if thumbnail is None:
            return self.nodelist_empty.render(context) if self.nodelist_empty else ""
        assert self.nodelist is not None
        with context.push(**{self.as_var: thumbnail}):
            return self.nodelist.render(context)


@register.tag("thumbnail")
def thumbnail_tag(parser: Parser, token: Token) -> ThumbnailNode:
    bits = token.split_contents()
    tag_name = bits.pop(0)
    as_var = None
    if len(bits) >= 2 and bits[-2] == "as":
        as_var = bits[-1]
        bits = bits[:-2]
        if not as_var.isidentifier():
            raise template.TemplateSyntaxError(f"{tag_name}: bad variable name {as_var!r}")
    if len(bits) < 2:
        raise template.TemplateSyntaxError(
            f"{tag_name} needs a source and a geometry: "
            f'{{% {tag_name} source "400x300" [key=value ...] [as var] %}}'
        )
    source = parser.compile_filter(bits[0])
    geometry = parser.compile_filter(bits[1])
    kwargs: dict[str, FilterExpression] = {}
    for bit in bits[2:]:
        name, sep, value = bit.partition("=")
        if not sep or not name.isidentifier():
            raise template.TemplateSyntaxError(f"{tag_name}: expected key=value, got {bit!r}")
        if name in kwargs:
            raise template.TemplateSyntaxError(f"{tag_name}: {name} given twice")
        kwargs[name] = parser.compile_filter(value)
    nodelist = nodelist_empty = None
    if as_var is not None:
        nodelist = parser.parse(("empty", "endthumbnail"))
        if parser.next_token().contents == "empty":
            nodelist_empty = parser.parse(("endthumbnail",))
            parser.delete_first_token()
    return ThumbnailNode(source, geometry, kwargs, as_var, nodelist, nodelist_empty)


def thumbnail_or_none(source: Any, geometry: Any, kwargs: dict[str, Any]) -> Thumbnail | None:
    """The thumbnail, or None for an empty source or (when not DEBUG) a failure."""
    return tolerant(lambda: get_thumbnail(source, str(geometry), **kwargs), source)


def tolerant(build: Callable[[], Built], source: Any) -> Built | None:
    """``build()``, or None for an empty source or (when not DEBUG) a failure.

    A failure is logged with its traceback. Only the errors a bad argument or
    a bad source can cause are caught; anything else is a bug and propagates.
    The Jinja2 functions share this policy.
    """
    if not source:
        return None
    try:
        return build()
    except THUMBNAIL_ERRORS:
        if settings.DEBUG:
            raise
        logger.exception("thumbnail failed for %r", getattr(source, "name", source))
        return None


@register.simple_tag
def thumbnail_url(source: Any, geometry: str, **kwargs: Any) -> str:
    """``{% thumbnail_url photo.image "200x200" crop="center" %}``: just the URL.

    Same rules as ``{% thumbnail %}``: "" for an empty source or, when not
    DEBUG, a failure. Django escapes the result (simple tags are autoescaped).
    """
    thumbnail = thumbnail_or_none(source, geometry, kwargs)
    return thumbnail.url if thumbnail else ""


@register.simple_tag
def thumbnail_srcset(source: Any, geometry: str, widths: Any = None, **kwargs: Any) -> Srcset | str:
    """``{% thumbnail_srcset photo.image "400x300" widths="320,640" crop="center" %}``.

    Prints the ``srcset`` attribute value (``url 320w, url 640w, ...``). With
    ``as s``, ``s`` is the :class:`~django_oximg.responsive.Srcset`:
    ``{{ s }}`` is the attribute, ``s.url``/``s.width``/``s.height`` the
    default size for ``src`` and the intrinsic size. "" for an empty source
    or, when not DEBUG, a failure.
    """
    built = tolerant(lambda: get_srcset(source, str(geometry), widths, **kwargs), source)
    return built if built is not None else ""


@register.simple_tag
def picture(
    source: Any,
    geometry: str,
    widths: Any = None,
    sizes: str = "",
    formats: Any = MODERN_FORMATS,
    placeholder: Any = False,
    **kwargs: Any,
) -> SafeString:
    """``{% picture photo.image "800x600" widths="400,800" crop="smart" alt="..." %}``.

    A ``<picture>`` with AVIF and WebP ``<source>`` elements and a fallback
    ``<img>`` (src, srcset, sizes, width, height, alt, loading, decoding and
    any of class, id, title, fetchpriority, style given). Other keywords are
    ``{% thumbnail %}``'s. Nothing for an empty source or, when not DEBUG, a
    failure.
    """
    attrs = {name: kwargs.pop(name) for name in IMG_ATTRIBUTES if name in kwargs}

    def build() -> SafeString:
        built = get_picture(source, str(geometry), widths, formats, placeholder, **kwargs)
        return picture_html(built, sizes, attrs)

    return tolerant(build, source) or SafeString("")
