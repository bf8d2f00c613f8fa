"""A URLconf without django_oximg's views, so the tag falls back to URL_PREFIX."""

from __future__ import annotations

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
