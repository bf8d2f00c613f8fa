"""A page with a photo, as a Wagtail site has."""

from __future__ import annotations

from django.db import models
from wagtail.models import Page


class PhotoPage(Page):
    photo = models.ForeignKey(
        "wagtailimages.Image", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
