"""The template tags as Jinja2 globals and filters, for Django's Jinja2 backend.

Add the extension to the backend's options::

    TEMPLATES = [{
        "BACKEND": "django.template.backends.jinja2.Jinja2",
        "OPTIONS": {"extensions": ["django_oximg.jinja2.OximgExtension"]},
    }]

or, in an environment function of your own, ``env.globals.update(GLOBALS)``
and ``env.filters.update(FILTERS)`` (without the extension's checks below).
Then::

    {% set t = thumbnail(photo.image, "400x300", crop="center") %}
    {% if t %}
      <img src="{{ t.url }}" width="{{ t.width }}" height="{{ t.height }}" alt="">
    {% endif %}
    <img src="{{ thumbnail_url(photo.image, "200") }}" alt="">
    <img src="{{ thumbnail_url(photo.image, preset="avatar") }}" alt="">
    <img src="{{ photo.image|thumbnail_url("avatar") }}" alt="">
    <img srcset="{{ thumbnail_srcset(photo.image, "400x300", widths="320,640") }}" ...>
    {{ picture(photo.image, "800x600", widths="400,800", alt="A photo") }}

Same arguments, same failure policy as the Django tags (log one line and
give nothing, unless ``RAISE_TEMPLATE_ERRORS``); the filters are the Django
ones (``is_portrait``, ``margin``, ``resolution``, ``thumbnail_url``,
``data_uri``). ``picture`` returns ``Markup``; everything else is escaped by
Jinja2's autoescaping as usual.

With the extension, a call to one of the globals whose arguments are
literals is checked when the template is compiled, as the Django tags are:
an unknown keyword, a bad crop, geometry or preset is a
``TemplateSyntaxError`` naming it. Arguments given by variables are checked
when the call runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from jinja2 import Environment, TemplateSyntaxError
from jinja2.ext import Extension
from jinja2.lexer import Token, TokenStream
from markupsafe import Markup

from django_oximg import tag_functions as tags
from django_oximg.responsive import MODERN_FORMATS, Srcset
from django_oximg.thumbnails import Thumbnail, ThumbnailError


def thumbnail(source: Any, geometry: Any = "", **kwargs: Any) -> Thumbnail | None:
    """The :class:`~django_oximg.thumbnails.Thumbnail`, or None (empty source, failure)."""
    return tags.thumbnail_or_none(source, geometry, kwargs)


def thumbnail_url(source: Any, geometry: Any = "", **kwargs: Any) -> str:
    """Just the URL ("" for an empty source or a failure)."""
    return tags.thumbnail_url(source, geometry, **kwargs)


def thumbnail_srcset(source: Any, geometry: str, widths: Any = None, **kwargs: Any) -> Srcset | str:
    """The :class:`~django_oximg.responsive.Srcset` ("" for an empty source or a failure)."""
    return tags.thumbnail_srcset(source, geometry, widths, **kwargs)


def picture(
    source: Any,
    geometry: str,
    widths: Any = None,
    sizes: str = "",
    formats: Any = MODERN_FORMATS,
    placeholder: Any = False,
    **kwargs: Any,
) -> Markup:
    """The ``<picture>`` element, already escaped (empty for an empty source or a failure)."""
    return Markup(tags.picture(source, geometry, widths, sizes, formats, placeholder, **kwargs))


#: The globals the extension installs, by name.
GLOBALS: Mapping[str, Callable[..., Any]] = {
    "thumbnail": thumbnail,
    "thumbnail_url": thumbnail_url,
    "thumbnail_srcset": thumbnail_srcset,
    "picture": picture,
}

#: The filters the extension installs, by name: sorl-thumbnail's and easy-thumbnails'.
FILTERS: Mapping[str, Callable[..., Any]] = {
    "thumbnail_url": tags.thumbnail_url_filter,
    "is_portrait": tags.is_portrait,
    "margin": tags.margin,
    "resolution": tags.resolution,
    "data_uri": tags.data_uri,
}

#: Keywords of each global that are not the thumbnail's own.
EXTRA_KEYWORDS: Mapping[str, frozenset[str]] = {
    "thumbnail": frozenset(),
    "thumbnail_url": frozenset(),
    "thumbnail_srcset": tags.SRCSET_KEYWORDS,
    "picture": tags.PICTURE_KEYWORDS,
}

#: Token types that open and close a nesting level in an expression.
OPENING = frozenset({"lparen", "lbracket", "lbrace"})
CLOSING = frozenset({"rparen", "rbracket", "rbrace"})

#: Literal token types, and the names that are constants.
LITERAL_TYPES = frozenset({"string", "integer", "float"})
CONSTANTS = {"True": True, "true": True, "False": False, "false": False, "None": None, "none": None}


class OximgExtension(Extension):
    """Installs :data:`GLOBALS` and :data:`FILTERS`; checks literal arguments at compile time."""

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        environment.globals.update(GLOBALS)
        environment.filters.update(FILTERS)

    def filter_stream(self, stream: TokenStream) -> Iterable[Token]:
        tokens = list(stream)
        for index, token in enumerate(tokens):
            if is_call_of_a_global(tokens, index):
                check_call(token.value, tokens, index + 2, stream)
        return tokens


def is_call_of_a_global(tokens: list[Token], index: int) -> bool:
    """Whether ``tokens[index]`` calls one of :data:`GLOBALS` (not ``x.thumbnail(`` or a filter)."""
    token = tokens[index]
    return (
        token.type == "name"
        and token.value in GLOBALS
        and index + 1 < len(tokens)
        and tokens[index + 1].type == "lparen"
        and (index == 0 or tokens[index - 1].type not in ("dot", "pipe"))
    )


def call_arguments(tokens: list[Token], start: int) -> Iterator[list[Token]]:
    """The tokens of each argument of the call whose ``(`` is just before ``start``."""
    depth = 0
    current: list[Token] = []
    for token in tokens[start:]:
        if token.type in CLOSING and depth == 0:
            break
        if token.type == "comma" and depth == 0:
            yield current
            current = []
            continue
        depth += token.type in OPENING
        depth -= token.type in CLOSING
        current.append(token)
    if current:
        yield current


def literal(tokens: list[Token]) -> Any:
    """The value of an argument written as one literal, else ``VARIABLE``."""
    if len(tokens) != 1:
        return tags.VARIABLE
    token = tokens[0]
    if token.type in LITERAL_TYPES:
        return token.value
    if token.type == "name" and token.value in CONSTANTS:
        return CONSTANTS[token.value]
    return tags.VARIABLE


def check_call(name: str, tokens: list[Token], start: int, stream: TokenStream) -> None:
    """Raise ``TemplateSyntaxError`` for what the call's literal arguments already get wrong."""
    positional: list[Any] = []
    keywords: dict[str, Any] = {}
    for argument in call_arguments(tokens, start):
        if len(argument) > 1 and argument[0].type == "name" and argument[1].type == "assign":
            keywords[argument[0].value] = literal(argument[2:])
        elif not keywords:
            positional.append(literal(argument))
    geometry = positional[1] if len(positional) > 1 else ""
    try:
        tags.check_written(geometry, keywords, EXTRA_KEYWORDS[name])
    except ThumbnailError as exc:
        raise TemplateSyntaxError(
            f"{name}(): {exc}", tokens[start - 2].lineno, stream.name, stream.filename
        ) from None
