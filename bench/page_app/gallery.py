"""The gallery page of bench/page_bytes.py, and what serves its images.

``/`` renders ``page.html`` (each package's own tags) over the sources of
``sources.json`` as model ``ImageFieldFile`` objects; a template whose tag
refuses an option answers 501 with Django's message, so the benchmark can
skip that contender and say why; ``/check`` only compiles it. ``/media/`` serves the files
sorl-thumbnail and easy-thumbnails write, with Django's static view (its
``Last-Modified``, no ``Cache-Control``: what a media directory served
without extra configuration sends); ``/img/`` is django-oximg's view when it
is the contender.
"""

from __future__ import annotations

import json

from django.apps import apps
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.template import Context, Engine, Template, TemplateSyntaxError
from django.urls import URLPattern, URLResolver, include, path, re_path
from django.views.static import serve

from bench.page_app.models import Photo


def compiled() -> Template:
    return Engine.get_default().from_string((settings.STATE / "page.html").read_text("utf-8"))


def gallery(request: HttpRequest) -> HttpResponse:
    names = json.loads((settings.STATE / "sources.json").read_text(encoding="utf-8"))
    try:
        template = compiled()
    except TemplateSyntaxError as error:
        return HttpResponse(str(error), status=501, content_type="text/plain")
    sources = [Photo(image=name).image for name in names]
    return HttpResponse(template.render(Context({"sources": sources})))


def check(request: HttpRequest) -> HttpResponse:
    """The template compiled, nothing rendered (so no peer makes a thumbnail)."""
    try:
        compiled()
    except TemplateSyntaxError as error:
        return HttpResponse(str(error), status=501, content_type="text/plain")
    return HttpResponse("ok", content_type="text/plain")


def ping(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok", content_type="text/plain")


urlpatterns: list[URLPattern | URLResolver] = [
    path("", gallery),
    path("ping", ping),
    path("check", check),
    re_path(r"^media/(?P<path>.*)$", serve, {"document_root": settings.MEDIA_ROOT}),
]
if apps.is_installed("django_oximg"):
    urlpatterns.append(path("img/", include("django_oximg.urls")))
