"""What the tags compute: shared by the Django tags, the Jinja2 functions, the DRF field,
the admin widgets and Wagtail's tags.

The template engines only parse and check what a template writes
(``templatetags/oximg.py``, ``jinja2.py``); the URL, the size, the srcset,
the ``<picture>`` and the peers' filters are computed here, once for all of
them, with one policy for failures (:func:`tolerant`): what a bad argument
or a bad source causes renders the fallback and logs one WARNING line, or
raises with ``RAISE_TEMPLATE_ERRORS``; anything else is a bug and propagates.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from django.utils.safestring import SafeString

from django_oximg import conf
from django_oximg.arguments import check_arguments, parse_geometry
from django_oximg.core.errors import OximgError
from django_oximg.declared_sizes import declared_names
from django_oximg.responsive import (
    IMG_ATTRIBUTES,
    MODERN_FORMATS,
    Srcset,
    get_picture,
    get_srcset,
    picture_html,
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

logger = logging.getLogger("django_oximg")

#: What a failing thumbnail may raise; anything else is a bug and propagates.
THUMBNAIL_ERRORS = (ThumbnailError, OximgError)

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


class EmptyGeometry(str):
    """A geometry variable that gave nothing: its error names the variable, not ''."""

    token: str

    def __new__(cls, token: str) -> EmptyGeometry:
        value = super().__new__(cls, "")
        value.token = token
        return value


class UndefinedVariable(str):
    """What an undefined template variable gave (``string_if_invalid``, mostly "").

    It is that text everywhere, so the tag behaves as before, but its
    ``repr()``, which every error about a bad keyword value shows, names the
    variable: the log says ``bad upscale photo.upscale (undefined)``, not
    ``bad upscale ''``.
    """

    token: str

    def __new__(cls, token: str, text: str = "") -> UndefinedVariable:
        value = super().__new__(cls, text)
        value.token = token
        return value

    def __repr__(self) -> str:
        return f"{self.token} (undefined)"


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


# -- the values: thumbnail_url, thumbnail_srcset, picture ---------------------------


def thumbnail_url(source: Any, geometry: Any = "", **kwargs: Any) -> str:
    """``{% thumbnail_url photo.image "200x200" crop="center" %}``: just the URL.

    Same rules as ``{% thumbnail %}``: "" for an empty source or a failure.
    """
    thumbnail = thumbnail_or_none(source, geometry, kwargs)
    return thumbnail.url if thumbnail else ""


def thumbnail_srcset(source: Any, geometry: Any, widths: Any = None, **kwargs: Any) -> Srcset | str:
    """``{% thumbnail_srcset photo.image "400x300" widths="320,640" crop="center" %}``.

    Prints the ``srcset`` attribute value (``url 320w, url 640w, ...``). With
    ``as s``, ``s`` is the :class:`~django_oximg.responsive.Srcset`:
    ``{{ s }}`` is the attribute, ``s.url``/``s.width``/``s.height`` the
    default size for ``src`` and the intrinsic size. "" for an empty source
    or a failure.
    """
    return tolerant(lambda: get_srcset(source, given(geometry), widths, **kwargs), source, "")


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


# -- the peers' filters -----------------------------------------------------------


def thumbnail_url_filter(source: Any, preset: str) -> str:
    """easy-thumbnails' ``{{ photo.image|thumbnail_url:"avatar" }}``: the preset's URL.

    "" for an empty source or a failure, an unknown preset included.
    """
    return thumbnail_url(source, preset=preset)


def is_portrait(source: Any) -> bool:
    """sorl-thumbnail's ``{{ photo.image|is_portrait }}``: taller than wide, as shown.

    Takes a source (its EXIF orientation applied) or a thumbnail; False for
    an empty source or a failure.
    """
    return tolerant(lambda: is_taller(source_size(source)), source, False)


def is_taller(size: tuple[int, int]) -> bool:
    return size[1] > size[0]


def margin(source: Any, geometry: str) -> str:
    """sorl-thumbnail's ``{{ im|margin:"100x100" }}``: CSS margins that centre it in the box.

    "auto" for an empty source or a failure, as in sorl-thumbnail.
    """
    return tolerant(
        lambda: sorl_margin(source_size(source), parse_geometry(geometry)), source, "auto"
    )


def resolution(thumbnail: Any, factor: str) -> str:
    """sorl-thumbnail's ``{{ im.url|resolution:"2x" }}``: the same thumbnail at 2x the pixels.

    Takes a thumbnail or a URL the tags wrote. On a failure the URL is
    given back unchanged, so a ``srcset`` still works.
    """
    unchanged = str(thumbnail or "")
    return tolerant(lambda: url_at_resolution(thumbnail, factor), thumbnail, unchanged)


def data_uri(thumbnail: Any) -> str:
    """easy-thumbnails' ``{{ t|data_uri }}``: the image inline, as ``data:image/...;base64,``.

    It renders the image while the page renders; see
    :func:`django_oximg.thumbnails.data_uri`. "" for nothing or a failure.
    """
    return tolerant(lambda: inline_image(thumbnail), thumbnail, "")
