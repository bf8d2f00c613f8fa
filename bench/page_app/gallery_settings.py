"""Django settings for bench/page_bytes.py's gallery servers, one contender each.

The same settings for every package, from the environment the benchmark
sets: ``OXIMG_PAGE_CONTENDER`` (``oximg``, ``sorl`` or ``easy``: which app is
installed) and ``OXIMG_PAGE_STATE`` (a directory holding ``media/`` with the
sources, ``page.html``, the page's template, and ``sources.json``, the
sources' names; the database and every thumbnail are made under it, so a
new directory is an empty cache), and ``OXIMG_PAGE_SETTINGS``, JSON merged
into ``OXIMG`` (empty: none). Imports only Django: sorl-thumbnail and
easy-thumbnails run it in their own venv.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

CONTENDER = os.environ["OXIMG_PAGE_CONTENDER"]
STATE = Path(os.environ["OXIMG_PAGE_STATE"])

SECRET_KEY = "bench-only-not-secret"
DEBUG = False
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
# Two processes, each its own LocMemCache: fine for one page, said once here.
SILENCED_SYSTEM_CHECKS = ["oximg.W008"]
ALLOWED_HOSTS = ["127.0.0.1"]
ROOT_URLCONF = "bench.page_app.gallery"
MIDDLEWARE: list[str] = []
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "bench.page_app",
    {"oximg": "django_oximg", "sorl": "sorl.thumbnail", "easy": "easy_thumbnails"}[CONTENDER],
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(STATE / "db.sqlite3")}}
# Process-local, so a new server over a new state directory starts empty.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
MEDIA_ROOT = str(STATE / "media")
MEDIA_URL = "/media/"
STORAGES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
}
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates"}]
# imgproxy's documented example key and salt, as bench/bench_settings.py.
OXIMG = {
    "KEY": "943b421c9eb07c830af81030552c86009268de4e532ba2ee2eab8247c6da0881",
    "SALT": "520f986b998545b4785e0defbc4f3c1203f22de2374a3d53cb7a7fe9fea309c5",
}
OXIMG.update(json.loads(os.environ.get("OXIMG_PAGE_SETTINGS") or "{}"))
