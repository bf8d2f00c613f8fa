"""The test app's config: connects the purge hook the way a project would."""

from __future__ import annotations

from django.apps import AppConfig


class TestAppConfig(AppConfig):
    name = "tests.testapp"
    label = "testapp"
    default_auto_field = "django.db.models.AutoField"

    def ready(self) -> None:
        from django_oximg.purge import purge_on_change
        from tests.testapp.models import Photo

        purge_on_change(Photo, "image")
