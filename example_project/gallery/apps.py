"""App config for the demo gallery."""

from __future__ import annotations

from django.apps import AppConfig


class GalleryConfig(AppConfig):
    name = "gallery"
    verbose_name = "django-oximg demo gallery"
