"""Django settings for the test suite."""

from __future__ import annotations

import tempfile

SECRET_KEY = "tests-only-not-secret"
DEBUG = False
USE_TZ = True
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django_oximg",
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
ROOT_URLCONF = "tests.urls"
MIDDLEWARE: list[str] = []
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {},
    }
]
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# Replaced per test by the ``media`` fixture (tests/conftest.py).
MEDIA_ROOT = tempfile.gettempdir() + "/oximg-tests-unused"
MEDIA_URL = "/media/"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# imgproxy's documented example key and salt (hex), so tests can check
# compatibility with its published signatures.
OXIMG = {
    "KEY": "943b421c9eb07c830af81030552c86009268de4e532ba2ee2eab8247c6da0881",
    "SALT": "520f986b998545b4785e0defbc4f3c1203f22de2374a3d53cb7a7fe9fea309c5",
    "WORKERS": 2,
}
