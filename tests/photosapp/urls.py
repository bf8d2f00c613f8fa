"""The API, the admin of this app, and the thumbnail view (tests/urls.py stays as it is)."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from . import admin as photo_admin  # noqa: F401  (registers PhotoAdmin)
from .api import router

urlpatterns = [
    path("api/", include(router.urls)),
    path("admin/", admin.site.urls),
    path("img/", include("django_oximg.urls")),
]
