"""For ASGI projects: ``path("img/", include("django_oximg.urls_async"))``.

The same URLs (and the same ``oximg:serve`` name, so the template tag finds
the mount point) as :mod:`django_oximg.urls`, served by the async view.
"""

from __future__ import annotations

from django.urls import re_path

from django_oximg import views

app_name = "oximg"

urlpatterns = [
    re_path(r"^(?P<path>.+)$", views.serve_async, name="serve"),
]
