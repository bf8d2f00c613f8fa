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

The tags compute a URL and a size; they never process an image (except
``data_uri``, which inlines the bytes). What is wrong in the arguments as
written (an unknown keyword, a bad crop, geometry or preset) is a
``TemplateSyntaxError`` when the template is compiled. What goes wrong at
render time (a missing source, a bad value from a variable) renders the
``{% empty %}`` branch, or nothing, and logs one WARNING line on the
``django_oximg`` logger, unless ``OXIMG["RAISE_TEMPLATE_ERRORS"]`` is on;
then it raises. Any other exception is a bug and always propagates. Printed
URLs are HTML-escaped unless autoescaping is off.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from django import template
from django.template.base import FilterExpression, NodeList, Parser, Token, TokenType, Variable
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString

from django_oximg import conf
from django_oximg.arguments import (
    FLAGS,
    KEYWORDS,
    UNSUPPORTED,
    check_arguments,
    parse_geometry,
)
from django_oximg.core.errors import OximgError
from django_oximg.declared import declared_names
from django_oximg.responsive import (
    IMG_ATTRIBUTES,
    MODERN_FORMATS,
    Srcset,
    get_picture,
    get_srcset,
    picture_html,
    widths_of,
)
from django_oximg.sizing import sorl_margin
from django_oximg.thumbnails import (
    Thumbnail,
    ThumbnailError,
    get_thumbnail,
    source_size,
    url_at_resolution,
)
from django_oximg.thumbnails import data_uri as inline_image

register = template.Library()
logger = logging.getLogger("django_oximg")

#: What a failing thumbnail may raise; anything else is a bug and propagates.
THUMBNAIL_ERRORS = (ThumbnailError, OximgError)

#: An unquoted size in easy-thumbnails' form (``{% thumbnail photo 100x100 %}``):
#: no variable name starts with a digit, so it can only be a size (or a
#: mistake, which is then reported as one, not as a variable that gave '').
UNQUOTED_SIZE = re.compile(r"[0-9][0-9A-Za-z]*")

#: ``name=value`` in a tag, as Django's simple tags read it.
KEYWORD = re.compile(r"(?P<name>\w+)=(?P<value>.+)", re.DOTALL)

#: Template words that are values, not variables.
CONSTANTS = {"True": True, "False": False, "None": None}

#: Keywords of the responsive tags besides the thumbnail's, and of ``picture``.
SRCSET_KEYWORDS = frozenset({"widths"})
PICTURE_KEYWORDS = frozenset({"widths", "sizes", "formats", "placeholder", *IMG_ATTRIBUTES})

#: Marks a written argument whose value a variable gives (checked when the tag renders).
VARIABLE = object()

Built = TypeVar("Built")
Fallback = TypeVar("Fallback")


# -- failures -----------------------------------------------------------------------


def tolerant(build: Callable[[], Built], source: Any, fallback: Fallback) -> Built | Fallback:
    """``build()``, or ``fallback`` for an empty source or a failure.

    A failure is logged as one WARNING line naming the source, without the
    traceback (which would be the template engine's frames), or raised when
    ``RAISE_TEMPLATE_ERRORS`` is on. Only the errors a bad argument or a
    bad source can cause are caught; anything else is a bug and propagates.
    The Jinja2 functions and the admin share this policy.
    """
    if not source:
        return fallback
    try:
        return build()
    except THUMBNAIL_ERRORS as exc:
        if conf.get_settings().RAISE_TEMPLATE_ERRORS:
            raise
        log_failure(source, exc)
        return fallback


def log_failure(source: Any, exc: Exception) -> None:
    """One WARNING line: which source, which error, and what it says."""
    name = getattr(source, "name", source)
    if isinstance(source, Thumbnail):
        name = source.url
    message = " ".join(str(exc).split())
    logger.warning("thumbnail of %r failed: %s: %s", name, type(exc).__name__, message)


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
        kwargs = {name: value.resolve(context) for name, value in self.kwargs.items()}
        if not geometry and not kwargs.get("preset") and not is_literal(self.geometry):
            geometry = EmptyGeometry(self.geometry.token)
        return source, geometry, kwargs


class EmptyGeometry(str):
    """A geometry variable that gave nothing: its error names the variable, not ''."""

    token: str

    def __new__(cls, token: str) -> EmptyGeometry:
        value = super().__new__(cls, "")
        value.token = token
        return value


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


def check_written(geometry: Any, keywords: Mapping[str, Any], extra: frozenset[str]) -> None:
    """:func:`~django_oximg.arguments.check_arguments` for a call as written.

    ``geometry`` and the ``keywords``' values are literals, or
    :data:`VARIABLE`; ``extra`` are the keywords that are not the
    thumbnail's own. The Django tags and the Jinja2 extension both check
    their templates with it.
    """
    names = set(keywords) - extra
    literals = {
        name: value for name, value in keywords.items() if name in names and value is not VARIABLE
    }
    settings = conf.get_settings()
    check_arguments(
        None if geometry is VARIABLE else str(geometry),
        names,
        literals,
        settings.PRESETS,
        declared_names(),
        settings.EXTENSIONS,
    )


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


def thumbnail_or_none(source: Any, geometry: Any, kwargs: dict[str, Any]) -> Thumbnail | None:
    """The thumbnail, or None for an empty source or a failure (see :func:`tolerant`)."""

    return tolerant(lambda: get_thumbnail(source, given(geometry), **kwargs), source, None)


def given(geometry: Any) -> Any:
    """``geometry``, unless it is a variable that gave nothing: that is an error naming it."""
    if isinstance(geometry, EmptyGeometry):
        raise ThumbnailError(
            f"the geometry {geometry.token} is empty or undefined: "
            'write a size in quotes ("200x100") or give a preset'
        )
    return geometry


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


@call_tag("thumbnail_url")
def thumbnail_url(source: Any, geometry: Any = "", **kwargs: Any) -> str:
    """``{% thumbnail_url photo.image "200x200" crop="center" %}``: just the URL.

    Same rules as ``{% thumbnail %}``: "" for an empty source or a failure.
    """
    thumbnail = thumbnail_or_none(source, geometry, kwargs)
    return thumbnail.url if thumbnail else ""


@call_tag("thumbnail_srcset", extra=SRCSET_KEYWORDS)
def thumbnail_srcset(source: Any, geometry: Any, widths: Any = None, **kwargs: Any) -> Srcset | str:
    """``{% thumbnail_srcset photo.image "400x300" widths="320,640" crop="center" %}``.

    Prints the ``srcset`` attribute value (``url 320w, url 640w, ...``). With
    ``as s``, ``s`` is the :class:`~django_oximg.responsive.Srcset`:
    ``{{ s }}`` is the attribute, ``s.url``/``s.width``/``s.height`` the
    default size for ``src`` and the intrinsic size. "" for an empty source
    or a failure.
    """
    return tolerant(lambda: get_srcset(source, given(geometry), widths, **kwargs), source, "")


@call_tag("picture", extra=PICTURE_KEYWORDS)
def picture(
    source: Any,
    geometry: Any,
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
    ``{% thumbnail %}``'s. Nothing for an empty source or a failure.
    """
    attrs = {name: kwargs.pop(name) for name in IMG_ATTRIBUTES if name in kwargs}

    def build() -> SafeString:
        built = get_picture(source, given(geometry), widths, formats, placeholder, **kwargs)
        return picture_html(built, sizes, attrs)

    return tolerant(build, source, SafeString(""))


# -- filters ----------------------------------------------------------------------


@register.filter("thumbnail_url")
def thumbnail_url_filter(source: Any, preset: str) -> str:
    """easy-thumbnails' ``{{ photo.image|thumbnail_url:"avatar" }}``: the preset's URL.

    "" for an empty source or a failure, an unknown preset included.
    """
    return thumbnail_url(source, preset=preset)


@register.filter
def is_portrait(source: Any) -> bool:
    """sorl-thumbnail's ``{{ photo.image|is_portrait }}``: taller than wide, as shown.

    Takes a source (its EXIF orientation applied) or a thumbnail; False for
    an empty source or a failure.
    """
    return tolerant(lambda: is_taller(source_size(source)), source, False)


def is_taller(size: tuple[int, int]) -> bool:
    return size[1] > size[0]


@register.filter
def margin(source: Any, geometry: str) -> str:
    """sorl-thumbnail's ``{{ im|margin:"100x100" }}``: CSS margins that centre it in the box.

    "auto" for an empty source or a failure, as in sorl-thumbnail.
    """
    return tolerant(
        lambda: sorl_margin(source_size(source), parse_geometry(geometry)), source, "auto"
    )


@register.filter
def resolution(thumbnail: Any, factor: str) -> str:
    """sorl-thumbnail's ``{{ im.url|resolution:"2x" }}``: the same thumbnail at 2x the pixels.

    Takes a thumbnail or a URL the tags wrote. On a failure the URL is
    given back unchanged, so a ``srcset`` still works.
    """
    unchanged = str(thumbnail or "")
    return tolerant(lambda: url_at_resolution(thumbnail, factor), thumbnail, unchanged)


@register.filter
def data_uri(thumbnail: Any) -> str:
    """easy-thumbnails' ``{{ t|data_uri }}``: the image inline, as ``data:image/...;base64,``.

    It renders the image while the page renders; see
    :func:`django_oximg.thumbnails.data_uri`. "" for nothing or a failure.
    """
    return tolerant(lambda: inline_image(thumbnail), thumbnail, "")
