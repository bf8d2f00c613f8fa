"""An admin site of its own (not ``admin.site``), so nothing else sees these registrations."""

from __future__ import annotations

from types import MappingProxyType

from django.contrib import admin

from django_oximg.admin import ThumbnailAdminMixin
from tests.adminapp.models import Artwork

site = admin.AdminSite(name="oximg_test_admin")


class ArtworkAdmin(ThumbnailAdminMixin, admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("thumbnail_preview", "title")
    thumbnail_field = "image"
    thumbnail_geometry = "60x60"
    thumbnail_options = MappingProxyType({"crop": "center"})


site.register(Artwork, ArtworkAdmin)
