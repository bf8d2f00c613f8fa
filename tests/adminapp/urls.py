"""The test admin site and the thumbnail view (tests/urls.py stays as it is)."""

from __future__ import annotations

from django.urls import include, path

from tests.adminapp.admin import site

urlpatterns = [
    path("admin/", site.urls),
    path("img/", include("django_oximg.urls")),
]
