"""The change form with the focal point widget: docs/focal-point.md shows this module as it is.

It registers on ``admin.site``, which in the tests (no autodiscovery, see
tests/settings.py) holds only what this module registers; tests/test_focal_point.py
checks that the page and this file agree.
"""

from __future__ import annotations

from types import MappingProxyType

from django.contrib import admin

from django_oximg.admin import ThumbnailAdminMixin

from .models import Photo


@admin.register(Photo)
class PhotoAdmin(ThumbnailAdminMixin, admin.ModelAdmin):
    list_display = ("thumbnail_preview", "title")
    # A crop that names no place of its own follows each photo's focal point.
    thumbnail_options = MappingProxyType({"crop": True})
    fields = ("title", "image", "focal_point")
