"""Wagtail's page serving, API and image serve view, and django-oximg's view under /img/."""

from __future__ import annotations

from django.urls import include, path, re_path
from wagtail.admin import urls as wagtailadmin_urls
from wagtail.api.v2.router import WagtailAPIRouter
from wagtail.api.v2.views import PagesAPIViewSet
from wagtail.images.views.serve import ServeView

api = WagtailAPIRouter("wagtailapi")
api.register_endpoint("pages", PagesAPIViewSet)

urlpatterns = [
    path("img/", include("django_oximg.urls")),
    path("api/v2/", api.urls),
    path("admin/", include(wagtailadmin_urls)),
    # Wagtail's dynamic serve view, for images whose renditions are URLs: a redirect
    re_path(
        r"^images/([^/]*)/(\d*)/([^/]*)/[^/]*$",
        ServeView.as_view(action="redirect"),
        name="wagtailimages_serve",
    ),
    path("", include("wagtail.urls")),
]
