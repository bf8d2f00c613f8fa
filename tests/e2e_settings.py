"""Settings for the gunicorn end-to-end tests: tests.settings with a media root from the env.

The test process writes sources under a temporary directory and passes it as
``OXIMG_E2E_MEDIA_ROOT``; everything the server writes (the result cache under
``MEDIA_ROOT/oximg``) stays there. ``OXIMG_E2E_OVERRIDES`` (JSON, optional)
replaces OXIMG keys, so one test project serves tests with different limits
(tests/servers.py sets it).
"""

from __future__ import annotations

import json
import os

from tests.settings import *  # noqa: F403
from tests.settings import OXIMG as BASE_OXIMG

MEDIA_ROOT = os.environ["OXIMG_E2E_MEDIA_ROOT"]
STORAGES = {
    "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": MEDIA_ROOT},  # type: ignore[dict-item]
    },
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
OXIMG = {**BASE_OXIMG, **json.loads(os.environ.get("OXIMG_E2E_OVERRIDES") or "{}")}

# Cross-process coordination tests: a Redis cache for leases, and a source
# storage that logs every open (one line per read, from any worker process).
if os.environ.get("OXIMG_E2E_REDIS_URL"):
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "coordination": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": os.environ["OXIMG_E2E_REDIS_URL"],
            # As docs/deployment.md advises (system check oximg.W010).
            "OPTIONS": {"socket_connect_timeout": 1.0, "socket_timeout": 1.0},
        },
    }
if os.environ.get("OXIMG_E2E_READ_LOG"):
    STORAGES["default"] = {
        "BACKEND": "tests.e2e_storage.ReadLoggingStorage",
        "OPTIONS": {  # type: ignore[dict-item]
            "location": MEDIA_ROOT,
            "log": os.environ["OXIMG_E2E_READ_LOG"],
            "delay": float(os.environ.get("OXIMG_E2E_READ_DELAY", "0")),
        },
    }

# Shared S3 result cache (tests/test_s3.py): django-storages' S3Storage on the
# test's moto server, offered as the STORAGES alias "s3cache" (the test sets
# OXIMG["CACHE_STORAGE"] through OXIMG_E2E_OVERRIDES), and with
# OXIMG_E2E_S3_SOURCE_BUCKET, sources in S3 as "s3source" (for
# OXIMG["SOURCE_STORAGE"]). One attempt per request, so a fault the test
# injects is not hidden by retries.
if os.environ.get("OXIMG_E2E_S3_ENDPOINT"):
    from botocore.config import Config

    def s3_storage(bucket: str) -> dict[str, object]:
        return {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": bucket,
                "endpoint_url": os.environ["OXIMG_E2E_S3_ENDPOINT"],
                "access_key": "testing",
                "secret_key": "testing",
                "region_name": "us-east-1",
                "client_config": Config(
                    s3={"addressing_style": "path"},
                    retries={"total_max_attempts": 1, "mode": "standard"},
                ),
            },
        }

    STORAGES["s3cache"] = s3_storage(os.environ["OXIMG_E2E_S3_BUCKET"])  # type: ignore[assignment]
    if os.environ.get("OXIMG_E2E_S3_SOURCE_BUCKET"):
        STORAGES["s3source"] = s3_storage(os.environ["OXIMG_E2E_S3_SOURCE_BUCKET"])  # type: ignore[assignment]

# Log lines of django_oximg at this level on stderr (gunicorn's log file), with
# their level first, so tests can read what a request wrote into the log.
if os.environ.get("OXIMG_E2E_LOG_LEVEL"):
    LOGGING = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"level": {"format": "%(levelname)s %(message)s"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "level"}},
        "loggers": {
            "django_oximg": {
                "handlers": ["stderr"],
                "level": os.environ["OXIMG_E2E_LOG_LEVEL"],
                "propagate": False,
            }
        },
    }

# tests/test_django_middleware.py: thumbnails served by the MIDDLEWARE entry,
# with no view in the URLconf (gunicorn serves tests.e2e_app:django_application).
if os.environ.get("OXIMG_E2E_DJANGO_MIDDLEWARE"):
    MIDDLEWARE = ["django_oximg.django_middleware.OximgServeMiddleware"]
    ROOT_URLCONF = "tests.urls_empty"
