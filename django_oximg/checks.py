"""System checks with stable ids (one test each in tests/test_checks.py).

* ``oximg.E001`` OXIMG is invalid (bad hex key, bad limits, ...).
* ``oximg.E002`` OXIMG has unknown keys (a typo would silently do nothing).
* ``oximg.E003`` a storage alias named in OXIMG does not exist in STORAGES.
* ``oximg.E004`` libvips is older than the minimum we support.
* ``oximg.E005`` ``COORDINATION_CACHE`` names an alias that is not in CACHES.
* ``oximg.W001`` unsigned URLs are allowed (anyone can make the server render).
* ``oximg.W002`` no KEY is set: a key derived from SECRET_KEY is used, so URLs
  change when SECRET_KEY does and cannot be shared with other imgproxy tools.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from django_oximg import conf


def register() -> None:
    checks.register(check_settings, "django_oximg")
    checks.register(check_libvips, "django_oximg")


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    messages: list[checks.CheckMessage] = []
    try:
        raw = conf.raw_settings()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="oximg.E001")]
    unknown = conf.unknown_keys(raw)
    if unknown:
        messages.append(
            checks.Error(
                f"OXIMG has unknown keys: {', '.join(unknown)}.",
                hint="See docs/settings.md for the keys django-oximg reads.",
                id="oximg.E002",
            )
        )
    try:
        settings = conf.build_settings(raw)
    except ImproperlyConfigured as exc:
        messages.append(checks.Error(str(exc), id="oximg.E001"))
        return messages
    aliases = [settings.SOURCE_STORAGE, *settings.SOURCES.values()]
    if settings.CACHE_STORAGE:
        aliases.append(settings.CACHE_STORAGE)
    configured = getattr(django_settings, "STORAGES", {})
    for alias in aliases:
        if alias not in configured:
            messages.append(
                checks.Error(
                    f"OXIMG names the storage alias {alias!r}, which is not in STORAGES.",
                    id="oximg.E003",
                )
            )
    if settings.COORDINATION_CACHE and settings.COORDINATION_CACHE not in getattr(
        django_settings, "CACHES", {}
    ):
        messages.append(
            checks.Error(
                f"OXIMG['COORDINATION_CACHE'] is {settings.COORDINATION_CACHE!r}, "
                "which is not in CACHES.",
                id="oximg.E005",
            )
        )
    if settings.ALLOW_UNSIGNED:
        messages.append(
            checks.Warning(
                "OXIMG['ALLOW_UNSIGNED'] is on: anyone can make this server render any image.",
                hint="Only use it for local experiments.",
                id="oximg.W001",
            )
        )
    if not raw.get("KEY"):
        messages.append(
            checks.Warning(
                "OXIMG['KEY'] is not set: a key derived from SECRET_KEY signs URLs.",
                hint="Set KEY and SALT (hex) so URLs survive a SECRET_KEY rotation.",
                id="oximg.W002",
            )
        )
    return messages


def check_libvips(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    from django_oximg.core import pipeline

    try:
        pipeline.check_libvips_version()
    except RuntimeError as exc:
        return [checks.Error(str(exc), id="oximg.E004")]
    return []
