"""Django settings for the load benchmark's servers (bench/servers.py).

Minimal on purpose, so that the same settings serve today's package and an
older checkout of it (the "before" contender): only django_oximg installed,
the view at /img/, sources and the result cache under $OXIMG_BENCH_MEDIA_ROOT,
imgproxy's documented example key and salt (as tests/settings.py), and
OXIMG overrides as JSON in $OXIMG_BENCH_OVERRIDES.

Two optional parts, each from the environment, so a benchmark can run the
deployment of docs/deployment.md (the overrides then name them):

- ``$OXIMG_BENCH_S3_ENDPOINT`` with ``$OXIMG_BENCH_S3_SOURCE_BUCKET`` and
  ``$OXIMG_BENCH_S3_CACHE_BUCKET``: django-storages' S3Storage over those
  buckets as the STORAGES aliases "s3source" and "s3cache", configured as
  docs/storages.md shows (credentials, region, endpoint; botocore's own
  retries and timeouts);
- ``$OXIMG_BENCH_REDIS_URL``: a Redis cache as CACHES["coordination"], with
  the socket timeouts docs/deployment.md advises.
"""

from __future__ import annotations

import json
import os
from typing import Any

SECRET_KEY = "bench-only-not-secret"
DEBUG = False
USE_TZ = True
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = ["django_oximg"]
ROOT_URLCONF = "bench.urls_bench"
MIDDLEWARE: list[str] = []
DATABASES: dict[str, object] = {}
CACHES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}
MEDIA_ROOT = os.environ["OXIMG_BENCH_MEDIA_ROOT"]
MEDIA_URL = "/media/"
STORAGES: dict[str, dict[str, Any]] = {
    "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": MEDIA_ROOT},
    },
}
if os.environ.get("OXIMG_BENCH_S3_ENDPOINT"):

    def s3_storage(bucket: str) -> dict[str, object]:
        return {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": bucket,
                "endpoint_url": os.environ["OXIMG_BENCH_S3_ENDPOINT"],
                "access_key": "testing",
                "secret_key": "testing",
                "region_name": "us-east-1",
            },
        }

    STORAGES["s3source"] = s3_storage(os.environ["OXIMG_BENCH_S3_SOURCE_BUCKET"])
    STORAGES["s3cache"] = s3_storage(os.environ["OXIMG_BENCH_S3_CACHE_BUCKET"])
if os.environ.get("OXIMG_BENCH_REDIS_URL"):
    CACHES["coordination"] = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": os.environ["OXIMG_BENCH_REDIS_URL"],
        "OPTIONS": {"socket_connect_timeout": 1.0, "socket_timeout": 1.0},
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
