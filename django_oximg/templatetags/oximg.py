"""``{% thumbnail %}`` in sorl-thumbnail's syntax, responsive images, and the peers' filters.

    {% load oximg %}
    {% thumbnail photo.image "400x300" crop="center" format="webp" as t %}
      <img src="{{ t.url }}" width="{{ t.width }}" height="{{ t.height }}" alt="">
    {% empty %}
      <p>No image.</p>
    {% endthumbnail %}

    <img src="{% thumbnail photo.image "200" %}" alt="">   {# prints the URL #}
    <img src="{% thumbnail photo.image 80x80 crop %}" alt="">   {# easy-thumbnails' way #}

    <img src="{% thumbnail_url photo.image "200" format="webp" %}" alt="">
    <img src="{% thumbnail_url photo.image preset="avatar" %}" alt="">
    <img src="{{ photo.image|thumbnail_url:"avatar" }}" alt="">

    <img srcset="{% thumbnail_srcset photo.image "400x300" widths="320,640" %}" ...>

    {% picture photo.image "800x600" widths="400,800,1200" crop="smart" alt="..." %}

sorl-thumbnail's filters work as there: ``is_portrait``, ``margin`` and
``resolution``; easy-thumbnails' ``thumbnail_url`` and ``data_uri`` too.

This module parses and checks what a template writes; the URL, the size
and the rest are computed by :mod:`django_oximg.tag_functions`, which the
Jinja2 functions, the DRF field and the admin share. They never process an
image (except ``data_uri``, which inlines the bytes). What is wrong in the
arguments as written (an unknown keyword, a bad crop, geometry or preset, a
number out of its range) is a ``TemplateSyntaxError`` when the template is
compiled. What goes wrong at render time (a missing source, a bad value
from a variable, which the line names when it is undefined) renders the
``{% empty %}`` branch, or nothing, and logs one WARNING line on the
``django_oximg`` logger, unless ``OXIMG["RAISE_TEMPLATE_ERRORS"]`` is on;
then it raises. Any other exception is a bug and always propagates. Printed
URLs are HTML-escaped unless autoescaping is off.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from django import template
from django.template.base import (
    FilterExpression,
    NodeList,
    Parser,
    Token,
    TokenType,
    Variable,
    VariableDoesNotExist,
)
from django.utils.html import conditional_escape

from django_oximg.arguments import FLAGS, KEYWORDS, UNSUPPORTED
from django_oximg.responsive import widths_of
from django_oximg.tag_functions import (
    PICTURE_KEYWORDS,
    SRCSET_KEYWORDS,
    VARIABLE,
    EmptyGeometry,
    UndefinedVariable,
    check_written,
    data_uri,
    is_portrait,
    margin,
    picture,
    resolution,
    thumbnail_or_none,
    thumbnail_srcset,
    thumbnail_url,
    thumbnail_url_filter,
)
from django_oximg.thumbnails import Thumbnail, ThumbnailError

register = template.Library()

#: An unquoted size in easy-thumbnails' form (``{% thumbnail photo 100x100 %}``):
#: no variable name starts with a digit, so it can only be a size (or a
#: mistake, which is then reported as one, not as a variable that gave '').
UNQUOTED_SIZE = re.compile(r"[0-9][0-9A-Za-z]*")

#: ``name=value`` in a tag, as Django's simple tags read it.
KEYWORD = re.compile(r"(?P<name>\w+)=(?P<value>.+)", re.DOTALL)

#: Template words that are values, not variables.
CONSTANTS = {"True": True, "False": False, "None": None}

# -- parsing: one syntax for every tag ------------------------------------------------


@dataclass(frozen=True)
class Arguments:
    """A tag's arguments as written: source, geometry, keywords, ``as`` name."""

    tag_name: str
    source: FilterExpression
    geometry: FilterExpression
    kwargs: dict[str, FilterExpression]
    as_var: str | None

    def resolve(self, context: template.Context) -> tuple[Any, Any, dict[str, Any]]:
        source = self.source.resolve(context)
        geometry = self.geometry.resolve(context)
        kwargs = {name: resolve_keyword(value, context) for name, value in self.kwargs.items()}
        if not geometry and not kwargs.get("preset") and not is_literal(self.geometry):
            geometry = EmptyGeometry(self.geometry.token)
        return source, geometry, kwargs


def resolve_keyword(expression: FilterExpression, context: template.Context) -> Any:
    """A keyword's value; an undefined variable gives an :class:`UndefinedVariable`.

    Django gives ``string_if_invalid`` ("") for it, which an error would show
    as ``''``; the marker is that same text, and names the variable in errors.
    """
    var = expression.var
    if expression.filters or not isinstance(var, Variable):
        return expression.resolve(context)
    try:
        return var.resolve(context)
    except VariableDoesNotExist:
        return UndefinedVariable(expression.token, expression.resolve(context))


def parse_arguments(parser: Parser, token: Token, extra: Iterable[str] = ()) -> Arguments:
    """Read ``{% tag source [geometry] [key=value | flag ...] [as name] %}`` and check it.

    The geometry may be left out when a ``preset`` gives the size, and
    written unquoted (``100x100``); ``crop``, ``upscale`` and ``padding``
    may be written alone, meaning True. Whatever is a literal is checked
    now (:func:`~django_oximg.arguments.check_arguments`): a mistake is a
    ``TemplateSyntaxError`` naming it, not an image missing in production.
    """
    bits = token.split_contents()
    tag_name = bits.pop(0)
    as_var = None
    if len(bits) >= 2 and bits[-2] == "as":
        as_var = bits[-1]
        bits = bits[:-2]
        if not as_var.isidentifier():
            raise template.TemplateSyntaxError(f"{tag_name}: bad variable name {as_var!r}")
    if not bits or KEYWORD.fullmatch(bits[0]):
        raise template.TemplateSyntaxError(
            f"{tag_name} needs a source and a geometry or a preset: "
            f'{{% {tag_name} source "400x300" [key=value ...] [as var] %}}'
        )
    source = parser.compile_filter(bits.pop(0))
    geometry = parser.compile_filter('""')
    if bits and not KEYWORD.fullmatch(bits[0]):
        written = bits.pop(0)
        if UNQUOTED_SIZE.fullmatch(written):
            written = f'"{written}"'
        geometry = parser.compile_filter(written)
    kwargs: dict[str, FilterExpression] = {}
    for bit in bits:
        match = KEYWORD.fullmatch(bit)
        name = match["name"] if match else bit
        if name in kwargs:
            raise template.TemplateSyntaxError(f"{tag_name}: {name} given twice")
        if match:
            kwargs[name] = parser.compile_filter(match["value"])
        elif bit in FLAGS:
            kwargs[name] = parser.compile_filter("True")
        else:
            hint = f" ({UNSUPPORTED[bit]})" if bit in UNSUPPORTED else ""
            if bit in KEYWORDS:
                hint = f" ({bit} takes a value: {bit}=...)"
            raise template.TemplateSyntaxError(
                f"{tag_name}: expected key=value, got {bit!r}{hint}; "
                f"only {', '.join(sorted(FLAGS))} may stand alone"
            )
    arguments = Arguments(tag_name, source, geometry, kwargs, as_var)
    check_literals(arguments, frozenset(extra))
    return arguments


def check_literals(arguments: Arguments, extra: frozenset[str]) -> None:
    """Raise ``TemplateSyntaxError`` for what the literal arguments already get wrong."""
    written = {name: written_value(value) for name, value in arguments.kwargs.items()}
    geometry = written_value(arguments.geometry)
    try:
        # A None geometry is left for the render to check.
        check_written(VARIABLE if geometry is None else geometry, written, extra)
        widths = written.get("widths", VARIABLE)
        if "widths" in extra and widths is not VARIABLE:
            widths_of(widths)
    except ThumbnailError as exc:
        raise template.TemplateSyntaxError(f"{arguments.tag_name}: {exc}") from None


def is_literal(expression: FilterExpression) -> bool:
    """Whether ``expression`` is a constant: a string, a number, True, False or None."""
    if expression.filters:
        return False
    var = expression.var
    if not isinstance(var, Variable):
        return True
    return var.literal is not None or var.var in CONSTANTS


def written_value(expression: FilterExpression) -> Any:
    """The value of a literal, or :data:`VARIABLE`."""
    if not is_literal(expression):
        return VARIABLE
    var = expression.var
    if not isinstance(var, Variable):
        return var
    return var.literal if var.literal is not None else CONSTANTS[str(var.var)]


# -- {% thumbnail %} ------------------------------------------------------------------


class ThumbnailNode(template.Node):
    """``{% thumbnail %}``: prints the URL, binds it for a block, or (``block`` off) sets it.

    With ``as`` and no ``{% endthumbnail %}`` anywhere after it, the tag is
    easy-thumbnails' form: it sets the variable in the current context
    ("" on a failure) and prints nothing.
    """

    child_nodelists = ("nodelist", "nodelist_empty")

    def __init__(
        self,
        arguments: Arguments,
        nodelist: NodeList | None,
        nodelist_empty: NodeList | None,
        block: bool = True,
    ) -> None:
        self.arguments = arguments
        self.nodelist = nodelist or NodeList()
        self.nodelist_empty = nodelist_empty or NodeList()
        self.block = block

    def thumbnail(self, context: template.Context) -> Thumbnail | None:
        source, geometry, kwargs = self.arguments.resolve(context)
        return thumbnail_or_none(source, geometry, kwargs)

    def render(self, context: template.Context) -> str:
        thumbnail = self.thumbnail(context)
        as_var = self.arguments.as_var
        if as_var is None:
            url = thumbnail.url if thumbnail else ""
            return str(conditional_escape(url)) if context.autoescape else url
        if not self.block:
            context[as_var] = thumbnail or ""
            return ""
        if thumbnail is None:
            return self.nodelist_empty.render(context)
        with context.push(**{as_var: thumbnail}):
            return self.nodelist.render(context)


@register.tag("thumbnail")
def thumbnail_tag(parser: Parser, token: Token) -> ThumbnailNode:
    arguments = parse_arguments(parser, token)
    if arguments.as_var is None:
        return ThumbnailNode(arguments, None, None)
    if not end_tag_follows(parser):
        return ThumbnailNode(arguments, None, None, block=False)
    nodelist = parser.parse(("empty", "endthumbnail"))
    nodelist_empty = None
    if parser.next_token().contents == "empty":
        nodelist_empty = parser.parse(("endthumbnail",))
        parser.delete_first_token()
    return ThumbnailNode(arguments, nodelist, nodelist_empty)


def end_tag_follows(parser: Parser) -> bool:
    """Whether an ``{% endthumbnail %}`` is still to come in the template.

    Templates written for sorl-thumbnail close ``{% thumbnail ... as t %}``;
    easy-thumbnails' never do. One template uses one form: mixing them is a
    ``TemplateSyntaxError`` (an unclosed tag), never a silent misreading.
    """
    return any(
        isinstance(token, Token)
        and token.token_type == TokenType.BLOCK
        and token.contents == "endthumbnail"
        for token in parser.tokens
    )


# -- the tags that return a value: thumbnail_url, thumbnail_srcset, picture --------------


class CallNode(template.Node):
    """Calls ``function(source, geometry, **kwargs)``; prints the result or binds it ``as`` a name.

    What Django's simple tags do, with :func:`parse_arguments`' syntax and checks.
    """

    def __init__(self, function: Callable[..., Any], arguments: Arguments) -> None:
        self.function = function
        self.arguments = arguments

    def render(self, context: template.Context) -> str:
        source, geometry, kwargs = self.arguments.resolve(context)
        output = self.function(source, geometry, **kwargs)
        if self.arguments.as_var is not None:
            context[self.arguments.as_var] = output
            return ""
        return str(conditional_escape(output)) if context.autoescape else str(output)


Function = TypeVar("Function", bound=Callable[..., Any])


def call_tag(name: str, extra: Iterable[str] = ()) -> Callable[[Function], Function]:
    """Register ``function`` as the tag ``name``, parsed by :func:`parse_arguments`."""

    def register_function(function: Function) -> Function:
        def compile_tag(parser: Parser, token: Token) -> CallNode:
            return CallNode(function, parse_arguments(parser, token, extra))

        register.tag(name, compile_tag)
        return function

    return register_function


call_tag("thumbnail_url")(thumbnail_url)
call_tag("thumbnail_srcset", extra=SRCSET_KEYWORDS)(thumbnail_srcset)
call_tag("picture", extra=PICTURE_KEYWORDS)(picture)

# -- filters: the peers' (sorl-thumbnail's, easy-thumbnails'), computed in tag_functions -----

register.filter("thumbnail_url", thumbnail_url_filter)
register.filter("is_portrait", is_portrait)
register.filter("margin", margin)
register.filter("resolution", resolution)
register.filter("data_uri", data_uri)
