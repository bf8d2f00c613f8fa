"""Django settings for tests/test_oscar.py: a django-oscar shop served by django-oximg.

Kept apart from tests/settings.py: Oscar's apps bring models and migrations
the rest of the suite has no use for. tests/test_oscar.py runs its tests in
a pytest of their own with these settings (``--ds``), so the test database
is migrated with Oscar's apps from the start. The apps, middleware,
context processors and search backend are those of Oscar's "Building your
own shop"; sorl-thumbnail is installed too, so that the tests can render
the same pages with Oscar's own ``SorlThumbnail`` and compare.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile

from oscar.defaults import *  # noqa: F403

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS, SILENCED_SYSTEM_CHECKS

INSTALLED_APPS = [
    *(app for app in INSTALLED_APPS if not app.startswith("django.contrib.admin")),
    "django.contrib.admin",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.sites",
    "django.contrib.flatpages",
    "oscar.config.Shop",
    "oscar.apps.analytics.apps.AnalyticsConfig",
    "oscar.apps.checkout.apps.CheckoutConfig",
    "oscar.apps.address.apps.AddressConfig",
    "oscar.apps.shipping.apps.ShippingConfig",
    "oscar.apps.catalogue.apps.CatalogueConfig",
    "oscar.apps.catalogue.reviews.apps.CatalogueReviewsConfig",
    "oscar.apps.communication.apps.CommunicationConfig",
    "oscar.apps.partner.apps.PartnerConfig",
    "oscar.apps.basket.apps.BasketConfig",
    "oscar.apps.payment.apps.PaymentConfig",
    "oscar.apps.offer.apps.OfferConfig",
    "oscar.apps.order.apps.OrderConfig",
    "oscar.apps.customer.apps.CustomerConfig",
    "oscar.apps.search.apps.SearchConfig",
    "oscar.apps.voucher.apps.VoucherConfig",
    "oscar.apps.wishlists.apps.WishlistsConfig",
    "oscar.apps.dashboard.apps.DashboardConfig",
    "oscar.apps.dashboard.reports.apps.ReportsDashboardConfig",
    "oscar.apps.dashboard.users.apps.UsersDashboardConfig",
    "oscar.apps.dashboard.orders.apps.OrdersDashboardConfig",
    "oscar.apps.dashboard.catalogue.apps.CatalogueDashboardConfig",
    "oscar.apps.dashboard.offers.apps.OffersDashboardConfig",
    "oscar.apps.dashboard.partners.apps.PartnersDashboardConfig",
    "oscar.apps.dashboard.pages.apps.PagesDashboardConfig",
    "oscar.apps.dashboard.ranges.apps.RangesDashboardConfig",
    "oscar.apps.dashboard.reviews.apps.ReviewsDashboardConfig",
    "oscar.apps.dashboard.vouchers.apps.VouchersDashboardConfig",
    "oscar.apps.dashboard.communications.apps.CommunicationsDashboardConfig",
    "oscar.apps.dashboard.shipping.apps.ShippingDashboardConfig",
    "widget_tweaks",
    "haystack",
    "treebeard",
    "sorl.thumbnail",
    "django_tables2",
]
SITE_ID = 1
ROOT_URLCONF = "tests.oscar_shop.urls"
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "oscar.apps.basket.middleware.BasketMiddleware",
    "django.contrib.flatpages.middleware.FlatpageFallbackMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.template.context_processors.i18n",
                "django.contrib.messages.context_processors.messages",
                "oscar.apps.search.context_processors.search_form",
                "oscar.apps.checkout.context_processors.checkout",
                "oscar.apps.communication.notifications.context_processors.notifications",
                "oscar.core.context_processors.metadata",
            ],
        },
    }
]
AUTHENTICATION_BACKENDS = [
    "oscar.apps.customer.auth_backends.EmailBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Oscar's catalogue lists products through Haystack: Whoosh (pure Python) in a
# directory per test process, kept up to date as products are saved.
WHOOSH_INDEX = tempfile.mkdtemp(prefix="oximg-oscar-whoosh-")
atexit.register(shutil.rmtree, WHOOSH_INDEX, ignore_errors=True)
HAYSTACK_CONNECTIONS = {
    "default": {
        "ENGINE": "haystack.backends.whoosh_backend.WhooshEngine",
        "PATH": WHOOSH_INDEX,
    }
}
HAYSTACK_SIGNAL_PROCESSOR = "haystack.signals.RealtimeSignalProcessor"
STATIC_URL = "/static/"
# What the tests switch between: Oscar's own class, and django-oximg's.
OSCAR_THUMBNAILER = "django_oximg.contrib.oscar.SorlThumbnail"
# A failing thumbnail raises in the tests instead of printing nothing.
OSCAR_THUMBNAIL_DEBUG = True
SILENCED_SYSTEM_CHECKS = [*SILENCED_SYSTEM_CHECKS]
