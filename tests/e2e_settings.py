"""Settings for the gunicorn end-to-end test: tests.settings with a media root from the env.

The test process writes sources under a temporary directory and passes it as
``OXIMG_E2E_MEDIA_ROOT``; everything the server writes (the result cache under
``MEDIA_ROOT/oximg``) stays there.
"""

from __future__ import annotations

import os

from tests.settings import *  # noqa: F403

MEDIA_ROOT = os.environ["OXIMG_E2E_MEDIA_ROOT"]
STORAGES = {
    "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": MEDIA_ROOT},  # type: ignore[dict-item]
    },
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
