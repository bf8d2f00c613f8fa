"""Settings for the ASGI tests (tests/test_asgi.py): the e2e settings, an async URLconf.

As tests/e2e_settings.py (media root from ``OXIMG_E2E_MEDIA_ROOT``), with the
URLconf of tests/asgi_app.py and a source storage whose ``gated/`` files open
only when the test says so (``OXIMG_ASGI_GATES`` names the directory of
gates), so a test can hold a render in flight for as long as it needs.
"""

from __future__ import annotations

import os

from tests.e2e_settings import *  # noqa: F403
from tests.e2e_settings import MEDIA_ROOT
from tests.e2e_settings import STORAGES as E2E_STORAGES

ROOT_URLCONF = "tests.asgi_app"
STORAGES = {
    **E2E_STORAGES,
    "default": {
        "BACKEND": "tests.asgi_app.GatedStorage",
        "OPTIONS": {  # type: ignore[dict-item]
            "location": MEDIA_ROOT,
            "gates": os.environ["OXIMG_ASGI_GATES"],
        },
    },
}
