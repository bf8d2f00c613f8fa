"""The test Wagtail site's app: integer ids, as Wagtail's own models have."""

from __future__ import annotations

from django.apps import AppConfig


class WagtailSiteConfig(AppConfig):
    name = "tests.wagtail_site"
    label = "wagtail_site"
    default_auto_field = "django.db.models.AutoField"
