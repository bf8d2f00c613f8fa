"""Photo in the admin, with django-oximg's thumbnail previews.

The change list gets a ``thumbnail_preview`` column; the change form shows
the current image above the file input (``ThumbnailAdminMixin`` gives every
``ImageField`` its previewing widget), and the focal point's widget: click
the preview to set the point the list's crops centre on.
"""

from __future__ import annotations

from types import MappingProxyType

from django.contrib import admin

from django_oximg.admin import ThumbnailAdminMixin
from gallery.models import Photo


@admin.register(Photo)
class PhotoAdmin(ThumbnailAdminMixin, admin.ModelAdmin):
    list_display = ("thumbnail_preview", "title", "uploaded_at")
    list_display_links = ("thumbnail_preview", "title")
    search_fields = ("title",)
    # Square tiles in the list: around each photo's focal point, else the middle.
    thumbnail_options = MappingProxyType({"crop": True})
