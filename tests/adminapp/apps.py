"""The admin test app's config."""

from __future__ import annotations

from django.apps import AppConfig


class AdminAppConfig(AppConfig):
    name = "tests.adminapp"
    label = "adminapp"
    default_auto_field = "django.db.models.AutoField"
