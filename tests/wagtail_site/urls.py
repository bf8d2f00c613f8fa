"""Wagtail's page serving, and django-oximg's view under /img/."""

from __future__ import annotations

from django.urls import include, path

urlpatterns = [
    path("img/", include("django_oximg.urls")),
    path("", include("wagtail.urls")),
]
