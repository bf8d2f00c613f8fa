"""The page's URLconf: the page itself, and django-oximg's view when it is the contender."""

from __future__ import annotations

from django.apps import apps
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, URLResolver, include, path


def page(request: HttpRequest) -> HttpResponse:  # pragma: no cover - never served
    return HttpResponse()


urlpatterns: list[URLPattern | URLResolver] = [path("", page)]
if apps.is_installed("django_oximg"):
    urlpatterns.append(path("img/", include("django_oximg.urls")))
