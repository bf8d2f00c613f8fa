"""Mount anywhere: ``path("img/", include("django_oximg.urls"))``."""

from __future__ import annotations

from django.urls import re_path

from django_oximg import views

app_name = "oximg"

urlpatterns = [
    # Everything after the mount point, line breaks and nothing included ("."
    # would not match a newline, and Django would answer such a path itself):
    # the thumbnailer decides every answer, as it does behind the middleware.
    re_path(r"^(?P<path>[\s\S]*)$", views.serve, name="serve"),
]
