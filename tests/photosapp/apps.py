"""The config of the app behind docs/drf.md and docs/focal-point.md's examples."""

from __future__ import annotations

from django.apps import AppConfig


class PhotosAppConfig(AppConfig):
    name = "tests.photosapp"
    label = "photosapp"
    default_auto_field = "django.db.models.AutoField"
