"""App configuration: system checks and settings-change wiring."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.core.signals import setting_changed

#: Settings whose change must rebuild the runtime.
RELEVANT_SETTINGS = frozenset(
    {"OXIMG", "STORAGES", "CACHES", "MEDIA_ROOT", "MEDIA_URL", "SECRET_KEY"}
)


def settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in RELEVANT_SETTINGS:
        from django_oximg import runtime

        runtime.reset()


class OximgConfig(AppConfig):
    name = "django_oximg"
    verbose_name = "django-oximg"
    default_auto_field = "django.db.models.AutoField"

    def ready(self) -> None:
        from django_oximg import checks
        from django_oximg.render_ahead import hooks

        checks.register()
        hooks.connect()
        setting_changed.connect(settings_changed, dispatch_uid="django_oximg.settings_changed")
