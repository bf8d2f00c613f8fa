"""``{% thumbnail %}`` in sorl-thumbnail's syntax.

    {% load oximg %}
    {% thumbnail photo.image "400x300" crop="center" format="webp" as t %}
      <img src="{{ t.url }}" width="{{ t.width }}" height="{{ t.height }}" alt="">
    {% empty %}
      <p>No image.</p>
    {% endthumbnail %}

    <img src="{% thumbnail photo.image "200" %}" alt="">   {# prints the URL #}

The tag computes a URL and a size; it never processes an image. An error
raises when ``DEBUG`` is on (so it is seen), otherwise it is logged and the
``{% empty %}`` branch (or nothing) is rendered.
"""

from __future__ import annotations

import logging
from typing import Any

from django import template
from django.conf import settings
from django.template.base import FilterExpression, NodeList, Parser, Token
from django.utils.html import conditional_escape

from django_oximg.core.errors import OximgError
from django_oximg.thumbnails import Thumbnail, ThumbnailError, get_thumbnail

register = template.Library()
logger = logging.getLogger("django_oximg")

#: What a failing thumbnail may raise; anything else is a bug and propagates.
THUMBNAIL_ERRORS = (ThumbnailError, OximgError, ValueError)


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
        if not source:
            return None
        try:
            return get_thumbnail(source, str(geometry), **kwargs)
        except THUMBNAIL_ERRORS:
            if settings.DEBUG:
                raise
            logger.exception("thumbnail failed for %r", getattr(source, "name", source))
            return None

    def render(self, context: template.Context) -> str:
        thumbnail = self.thumbnail(context)
        if self.as_var is None:
            return str(conditional_escape(thumbnail.url)) if thumbnail else ""
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
        kwargs[name] = parser.compile_filter(value)
    nodelist = nodelist_empty = None
    if as_var is not None:
        nodelist = parser.parse(("empty", "endthumbnail"))
        if parser.next_token().contents == "empty":
            nodelist_empty = parser.parse(("endthumbnail",))
            parser.delete_first_token()
    return ThumbnailNode(source, geometry, kwargs, as_var, nodelist, nodelist_empty)


@register.simple_tag
def thumbnail_url(source: Any, geometry: str, **kwargs: Any) -> str:
    """``{% thumbnail_url photo.image "200x200" crop="center" %}``: just the URL."""
    return get_thumbnail(source, geometry, **kwargs).url
