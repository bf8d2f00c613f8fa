"""The template tags as Jinja2 globals, for Django's Jinja2 backend.

Add the extension to the backend's options::

    TEMPLATES = [{
        "BACKEND": "django.template.backends.jinja2.Jinja2",
        "OPTIONS": {"extensions": ["django_oximg.jinja2.OximgExtension"]},
    }]

or, in an environment function of your own, ``env.globals.update(GLOBALS)``.
Then::

    {% set t = thumbnail(photo.image, "400x300", crop="center") %}
    {% if t %}
      <img src="{{ t.url }}" width="{{ t.width }}" height="{{ t.height }}" alt="">
    {% endif %}
    <img src="{{ thumbnail_url(photo.image, "200") }}" alt="">
    <img srcset="{{ thumbnail_srcset(photo.image, "400x300", widths="320,640") }}" ...>
    {{ picture(photo.image, "800x600", widths="400,800", alt="A photo") }}

Same arguments, same failure policy as the Django tags (raise when
``DEBUG``, else log and give nothing). ``picture`` returns ``Markup``;
everything else is escaped by Jinja2's autoescaping as usual.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from jinja2 import Environment
from jinja2.ext import Extension
from markupsafe import Markup

from django_oximg.responsive import MODERN_FORMATS, Srcset
from django_oximg.templatetags import oximg as tags
from django_oximg.thumbnails import Thumbnail


def thumbnail(source: Any, geometry: str, **kwargs: Any) -> Thumbnail | None:
    """The :class:`~django_oximg.thumbnails.Thumbnail`, or None (empty source, failure)."""
    return tags.thumbnail_or_none(source, geometry, kwargs)


def thumbnail_url(source: Any, geometry: str, **kwargs: Any) -> str:
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


class OximgExtension(Extension):
    """Installs :data:`GLOBALS` in the environment; adds no syntax."""

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        environment.globals.update(GLOBALS)
