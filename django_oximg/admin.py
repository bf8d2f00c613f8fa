"""Thumbnails in the Django admin: a change-list column and a change-form preview.

    from django.contrib import admin
    from django_oximg.admin import ThumbnailAdminMixin

    @admin.register(Photo)
    class PhotoAdmin(ThumbnailAdminMixin, admin.ModelAdmin):
        list_display = ["thumbnail_preview", "title"]
        thumbnail_field = "image"
        thumbnail_geometry = "80x80"
        thumbnail_options = {"crop": "center"}

This module registers nothing (the admin's autodiscovery imports it, as it
imports every app's ``admin`` module).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.admin.widgets import AdminFileWidget
from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.forms import Field
from django.http import HttpRequest
from django.utils.html import format_html

from django_oximg.widgets import ThumbnailFileWidget, thumbnail_or_log

if TYPE_CHECKING:
    ModelAdminBase = admin.ModelAdmin[Any]
else:
    ModelAdminBase = object


class AdminThumbnailFileWidget(ThumbnailFileWidget, AdminFileWidget):
    """:class:`ThumbnailFileWidget` with the admin's file-input template."""


class ThumbnailAdminMixin(ModelAdminBase):
    """Adds ``thumbnail_preview`` for ``list_display`` and image previews in forms.

    Put it before ``admin.ModelAdmin`` in the bases. The change list shows
    ``thumbnail_field`` at ``thumbnail_geometry`` (with ``width``/``height``,
    lazily loaded); the change form shows every ``ImageField``, and
    ``thumbnail_field`` if it is a plain ``FileField``, with a
    ``thumbnail_widget_geometry`` preview above its input. A file that cannot
    be thumbnailed is logged and shown as the empty value, never an error page.
    """

    #: The model's file field to show; "" takes the model's first ImageField.
    thumbnail_field: str = ""
    #: Size of the change-list thumbnail, as in ``{% thumbnail %}``.
    thumbnail_geometry: str = "80x80"
    #: More ``{% thumbnail %}`` keywords for it, e.g. ``{"crop": "center"}``.
    thumbnail_options: Mapping[str, Any] = {}
    #: Size of the preview above the file input in change forms (fitted, the
    #: whole image).
    thumbnail_widget_geometry: str = "200x200"

    @admin.display(description="thumbnail")
    def thumbnail_preview(self, obj: models.Model) -> str:
        """An ``<img>`` of ``thumbnail_field`` for the change list."""
        source = getattr(obj, self.thumbnail_field_name())
        thumbnail = thumbnail_or_log(source, self.thumbnail_geometry, dict(self.thumbnail_options))
        if thumbnail is None:
            return self.get_empty_value_display()
        return format_html(
            '<img src="{}" width="{}" height="{}" alt="" loading="lazy">',
            thumbnail.url,
            thumbnail.width,
            thumbnail.height,
        )

    def thumbnail_field_name(self) -> str:
        """``thumbnail_field``, or the model's first ImageField."""
        if self.thumbnail_field:
            return self.thumbnail_field
        for field in self.model._meta.get_fields():
            if isinstance(field, models.ImageField):
                return field.name
        raise ImproperlyConfigured(
            f"{type(self).__name__}: set thumbnail_field; {self.model.__name__} has no ImageField"
        )

    def formfield_for_dbfield(
        self, db_field: models.Field[Any, Any], request: HttpRequest, **kwargs: Any
    ) -> Field | None:
        """Give image fields (and ``thumbnail_field``) the previewing widget."""
        previewed = isinstance(db_field, models.ImageField) or (
            isinstance(db_field, models.FileField) and db_field.name == self.thumbnail_field
        )
        if previewed:
            kwargs["widget"] = AdminThumbnailFileWidget(geometry=self.thumbnail_widget_geometry)
        return super().formfield_for_dbfield(db_field, request, **kwargs)
