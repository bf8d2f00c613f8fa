"""URLconf for in-process benchmarks: the view mounted at /img/."""

from __future__ import annotations

from django.urls import include, path

urlpatterns = [path("img/", include("django_oximg.urls"))]
