"""The app that makes the ``oximg_wagtail`` tag library available."""

from __future__ import annotations

from django.apps import AppConfig


class OximgWagtailConfig(AppConfig):
    name = "django_oximg.contrib.wagtail"
    label = "oximg_wagtail"
    verbose_name = "django-oximg for Wagtail"
