"""Photo in the admin, with django-oximg's thumbnail previews.

The change list gets a ``thumbnail_preview`` column; the change form shows
the current image above the file input (``ThumbnailAdminMixin`` gives every
``ImageField`` its previewing widget), and the focal point's widget: click
the preview to set the point that the gallery's tiles and the list's crops
centre on, and see what each of them keeps of the image around it.
"""

from __future__ import annotations

from types import MappingProxyType

from django.contrib import admin

from django_oximg.admin import ThumbnailAdminMixin
from django_oximg.fields import FocalPointField, FocalPointWidget
from gallery.models import Photo

#: The crops that follow a photo's focal point, previewed beside it as it is
#: clicked: the gallery's tile (templates/gallery/index.html) and the list's.
FOCAL_PREVIEWS = MappingProxyType({"gallery": "320x240 crop", "change list": "80x80 crop"})


@admin.register(Photo)
class PhotoAdmin(ThumbnailAdminMixin, admin.ModelAdmin):
    list_display = ("thumbnail_preview", "title", "uploaded_at")
    list_display_links = ("thumbnail_preview", "title")
    search_fields = ("title",)
    # Square tiles in the list: around each photo's focal point, else the middle.
    thumbnail_options = MappingProxyType({"crop": True})
    # The focal point's widget previews the crops that follow the point.
    formfield_overrides = MappingProxyType(
        {FocalPointField: {"widget": FocalPointWidget(sizes=FOCAL_PREVIEWS)}}
    )
