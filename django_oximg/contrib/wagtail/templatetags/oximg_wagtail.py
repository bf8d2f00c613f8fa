"""Wagtail's ``image``, ``srcset_image`` and ``picture`` tags, served by django-oximg.

    {% load oximg_wagtail %}
    {% image page.photo fill-200x200 class="thumb" %}
    {% image page.photo fill-400x300-c75 format-webp as photo %}
      <img src="{{ photo.url }}" width="{{ photo.width }}" height="{{ photo.height }}" alt="">
    {% srcset_image page.photo width-{400,800} sizes="50vw" %}
    {% picture page.photo format-{avif,jpeg} width-{400,800} %}

The syntax, the filter specs and the HTML are Wagtail's (its own parser and
rendition methods do the work); the URLs are signed django-oximg URLs with
Wagtail's rendition sizes (:mod:`django_oximg.contrib.wagtail.renditions`),
so a page writes no rendition rows and renders no image. The library also
carries Wagtail's other tags (``image_url``), so that it can replace
``wagtailimages_tags`` for every template (docs/wagtail.md).

A spec that is wrong, or that django-oximg cannot serve (a filter
operation with no URL option, ``format-ico``), is a ``TemplateSyntaxError``
when the template is compiled. A missing source file gives Wagtail's
"not-found" rendition (``width`` and ``height`` 0), as Wagtail's tags do;
any other source that cannot be served gives the same and logs one
WARNING, unless ``OXIMG["RAISE_TEMPLATE_ERRORS"]`` is on (as
``{% thumbnail %}``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django import template
from django.template.base import Parser, Token
from wagtail.images.models import Filter, Picture, ResponsiveImage
from wagtail.images.templatetags import wagtailimages_tags as wagtail_tags

from django_oximg import conf
from django_oximg.contrib.wagtail.renditions import compile_spec, get_renditions
from django_oximg.core.errors import SourceNotFound
from django_oximg.tag_functions import THUMBNAIL_ERRORS, log_failure
from django_oximg.thumbnails import ThumbnailError

register = template.Library()


def renditions_or_not_found(image: Any, specs: Sequence[str]) -> dict[str, Any]:
    """The renditions of ``specs``, or Wagtail's "not-found" rendition for each.

    The not-found rendition is what Wagtail's ``get_rendition_or_not_found``
    makes for a missing file: an unsaved rendition of the image's own
    rendition model, 0x0, named "not-found" (nothing is written). A bad
    spec always raises: it is the template's error, not the image's.
    """
    for spec in specs:
        compile_spec(spec)
    try:
        return dict(get_renditions(image, specs))
    except THUMBNAIL_ERRORS as exc:
        if not isinstance(exc, SourceNotFound):
            if conf.get_settings().RAISE_TEMPLATE_ERRORS:
                raise
            log_failure(image.file, exc)
    rendition = image.renditions.model(image=image, width=0, height=0)
    rendition.file.name = "not-found"
    return dict.fromkeys(specs, rendition)


def resolved_attrs(attrs: dict[str, Any], context: template.Context) -> dict[str, Any]:
    return {name: value.resolve(context) for name, value in attrs.items()}


class ImageNode(wagtail_tags.ImageNode):  # type: ignore[misc]
    """``{% image %}``: one rendition, printed as an ``<img>`` or kept ``as`` a variable."""

    def render(self, context: template.Context) -> str:
        image = self.validate_image(context)
        if not image:
            return ""
        spec = self.get_filter().spec
        rendition = renditions_or_not_found(image, [spec])[spec]
        if self.output_var_name:
            context[self.output_var_name] = rendition
            return ""
        return str(rendition.img_tag(resolved_attrs(self.attrs, context)))


class SrcsetImageNode(wagtail_tags.SrcsetImageNode):  # type: ignore[misc]
    """``{% srcset_image %}``: Wagtail's brace-expanded specs, one URL per width."""

    response_class: Any = ResponsiveImage

    def render(self, context: template.Context) -> str:
        image = self.validate_image(context)
        if not image:
            return ""
        specs = Filter.expand_spec(self.filter_specs)
        renditions = renditions_or_not_found(image, specs)
        if self.output_var_name:
            context[self.output_var_name] = self.response_class(renditions)
            return ""
        attrs = resolved_attrs(self.attrs, context)
        return str(self.response_class(renditions, attrs).__html__())


class PictureNode(SrcsetImageNode):
    """``{% picture %}``: a ``<source>`` per ``format-``, Wagtail's fallback ``<img>``."""

    response_class = Picture


#: Wagtail's node classes, and this library's in their place.
NODES: dict[Any, type[ImageNode]] = {
    wagtail_tags.ImageNode: ImageNode,
    wagtail_tags.SrcsetImageNode: SrcsetImageNode,
    wagtail_tags.PictureNode: PictureNode,
}


def image(parser: Parser, token: Token) -> ImageNode:
    """Wagtail's parser, every spec checked now, and this library's node.

    The specs are literals in Wagtail's syntax, so a spec that cannot be
    served fails here, when the template is compiled, not on a page view.
    """
    node = wagtail_tags.image(parser, token)
    if isinstance(node, wagtail_tags.SrcsetImageNode):
        specs = Filter.expand_spec(node.filter_specs)
    else:
        specs = ["|".join(node.filter_specs)]
    for spec in specs:
        try:
            compile_spec(spec)
        except ThumbnailError as exc:
            raise template.TemplateSyntaxError(f"{token.split_contents()[0]}: {exc}") from exc
    return NODES[type(node)](
        node.image_expr,
        node.filter_specs,
        output_var_name=node.output_var_name,
        attrs=node.attrs,
    )


register.tag("image", image)
register.tag("srcset_image", image)
register.tag("picture", image)


@register.simple_tag()
def image_url(image: Any, filter_spec: str, viewname: str = "") -> str:
    """The URL alone: ``{% image_url page.photo "fill-200x200" %}``.

    Wagtail's ``image_url`` links to its dynamic serve view (``viewname``),
    which renders on request; here it is the same signed django-oximg URL
    as ``{% image %}``'s, and ``viewname`` is accepted and ignored. The
    spec may come from a variable, so a bad one raises when rendering.
    """
    if not image:
        return ""
    return str(renditions_or_not_found(image, [filter_spec])[filter_spec].url)


#: The tags this library serves in Wagtail's place.
OWN_TAGS = ("image", "srcset_image", "picture", "image_url")


def serve_wagtails_image_tags() -> Callable[[], None]:
    """Make Wagtail's own library's ``image`` tags this library's; returns the undo.

    Every ``{% load wagtailimages_tags %}`` then gets :data:`OWN_TAGS` from
    here: templates stay as they are, and no second library is registered
    under Wagtail's name, so Django's ``templates.W003`` has nothing to
    report. A template copies a library's tags when it is compiled, so this
    must run before the first template is (an ``AppConfig.ready()``,
    :class:`~django_oximg.contrib.wagtail.apps.OximgImageTagsConfig`).
    """
    tags = wagtail_tags.register.tags
    saved = {name: tags[name] for name in OWN_TAGS if name in tags}
    tags.update({name: register.tags[name] for name in OWN_TAGS})

    def undo() -> None:
        for name in OWN_TAGS:
            tags.pop(name, None)
        tags.update(saved)

    return undo


# Any tag or filter Wagtail adds to its library later, so that this library
# can always stand in for wagtailimages_tags.
for _name, _compile in wagtail_tags.register.tags.items():
    register.tags.setdefault(_name, _compile)
for _name, _filter in wagtail_tags.register.filters.items():
    register.filters.setdefault(_name, _filter)
