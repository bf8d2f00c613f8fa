"""Django settings for the load benchmark's servers (bench/servers.py).

Minimal on purpose, so that the same settings serve today's package and an
older checkout of it (the "before" contender): only django_oximg installed,
the view at /img/, sources and the result cache under $OXIMG_BENCH_MEDIA_ROOT,
imgproxy's documented example key and salt (as tests/settings.py), and
OXIMG overrides as JSON in $OXIMG_BENCH_OVERRIDES.
"""

from __future__ import annotations

import json
import os

SECRET_KEY = "bench-only-not-secret"
DEBUG = False
USE_TZ = True
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = ["django_oximg"]
ROOT_URLCONF = "bench.urls_bench"
MIDDLEWARE: list[str] = []
DATABASES: dict[str, object] = {}
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
MEDIA_ROOT = os.environ["OXIMG_BENCH_MEDIA_ROOT"]
MEDIA_URL = "/media/"
STORAGES = {
    "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": MEDIA_ROOT},
    },
}
OXIMG = {
    "KEY": "943b421c9eb07c830af81030552c86009268de4e532ba2ee2eab8247c6da0881",
    "SALT": "520f986b998545b4785e0defbc4f3c1203f22de2374a3d53cb7a7fe9fea309c5",
    # Queue like thumbor does at c=64 instead of shedding load (429) or timing
    # out queued large renders (503): this benchmark measures throughput;
    # bench/overload.py measures shedding. bench/servers.py runs more
    # gunicorn threads than WORKERS + QUEUE_SIZE.
    "QUEUE_SIZE": 128,
    "QUEUE_TIMEOUT": 60.0,
    **json.loads(os.environ.get("OXIMG_BENCH_OVERRIDES") or "{}"),
}
