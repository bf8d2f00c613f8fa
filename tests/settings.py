"""Django settings for the test suite."""

from __future__ import annotations

import os
import tempfile

from tests.constants import KEY, SALT

SECRET_KEY = "tests-only-not-secret"
DEBUG = False
USE_TZ = True
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django_oximg",
    "tests.testapp",
    "django.contrib.admin.apps.SimpleAdminConfig",  # no autodiscovery: tests/adminapp's own site
    "tests.adminapp",
    "tests.photosapp",  # docs/drf.md's and docs/focal-point.md's examples
]
# The test database is a file (one per process), not ":memory:", so that a test
# module can really close its connection when done (tests/test_purge_hooks.py):
# an open connection would make pytest-django refuse the next non-db test's
# request_finished -> close_old_connections.
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": ":memory:",
        "TEST": {"NAME": f"{tempfile.gettempdir()}/oximg-tests-{os.getpid()}.sqlite3"},
    }
}
ROOT_URLCONF = "tests.urls"
MIDDLEWARE: list[str] = []
# The admin of tests/adminapp gets its middleware and context processors from
# tests/test_admin.py's own settings; nothing else here needs them.
SILENCED_SYSTEM_CHECKS = [f"admin.E{n}" for n in (402, 404, 406, 408, 409, 410)]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {},
    }
]
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# One process, cleared by the tests that need it: the per-process metadata
# cache oximg.W008 warns about (with DEBUG off) is what the suite wants.
SILENCED_SYSTEM_CHECKS += ["oximg.W008"]
# Replaced per test by the ``media`` fixture (tests/conftest.py).
MEDIA_ROOT = tempfile.gettempdir() + "/oximg-tests-unused"
MEDIA_URL = "/media/"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# imgproxy's example key and salt (hex, tests/constants.py), so tests can check
# compatibility with its published signatures.
OXIMG = {"KEY": KEY, "SALT": SALT, "WORKERS": 2}
