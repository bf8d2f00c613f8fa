"""A Wagtail site's models: a page with a photo, and docs/wagtail.md's custom image model.

``SiteImage`` is the site's ``WAGTAILIMAGES_IMAGE_MODEL`` (tests/wagtail_settings.py),
with :class:`~django_oximg.contrib.wagtail.images.OximgRenditionsMixin`:
``ArticlePage``'s StreamField image blocks, its template's Wagtail tags and
its API field all ask it for renditions. ``PhotoPage`` shows Wagtail's own
``Image``, which keeps Wagtail's renditions (the comparisons in
tests/test_wagtail.py need them).
"""

from __future__ import annotations

from typing import ClassVar

from django.db import models
from wagtail.api import APIField
from wagtail.fields import StreamField
from wagtail.images.api.fields import ImageRenditionField
from wagtail.images.blocks import ImageBlock, ImageChooserBlock
from wagtail.images.models import AbstractImage, AbstractRendition, Image
from wagtail.models import Page

from django_oximg.contrib.wagtail.images import OximgRenditionsMixin


class PhotoPage(Page):
    photo = models.ForeignKey(
        "wagtailimages.Image", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )


class SiteImage(OximgRenditionsMixin, AbstractImage):
    admin_form_fields = Image.admin_form_fields


class SiteRendition(AbstractRendition):
    image = models.ForeignKey(SiteImage, on_delete=models.CASCADE, related_name="renditions")

    class Meta:
        unique_together = (("image", "filter_spec", "focal_point_key"),)


class ArticlePage(Page):
    hero = models.ForeignKey(
        "wagtail_site.SiteImage", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    body = StreamField(
        [("image", ImageBlock()), ("chosen", ImageChooserBlock())], blank=True, use_json_field=True
    )

    api_fields: ClassVar[list[APIField]] = [
        APIField("hero"),
        APIField("hero_thumbnail", serializer=ImageRenditionField("fill-100x80", source="hero")),
        APIField("body"),
    ]
