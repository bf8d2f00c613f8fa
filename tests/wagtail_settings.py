"""Django settings for tests/test_wagtail.py: a Wagtail site served by django-oximg.

Kept apart from tests/settings.py: Wagtail's apps bring models and
migrations the rest of the suite has no use for. tests/test_wagtail.py runs
its tests in a pytest of their own with these settings (``--ds``), so the
test database is migrated with Wagtail's apps from the start.
"""

from __future__ import annotations

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [
    *INSTALLED_APPS,
    "taggit",
    "modelcluster",
    "wagtail",
    "wagtail.sites",
    "wagtail.images",
    "wagtail.admin",
    "wagtail.users",
    "wagtail.api.v2",
    "rest_framework",
    "django_oximg.contrib.wagtail",
    "tests.wagtail_site",
]
ROOT_URLCONF = "tests.wagtail_site.urls"
WAGTAIL_SITE_NAME = "oximg tests"
WAGTAILADMIN_BASE_URL = "http://testserver"
STATIC_URL = "/static/"
#: docs/wagtail.md's custom image model, with django-oximg's renditions.
WAGTAILIMAGES_IMAGE_MODEL = "wagtail_site.SiteImage"
