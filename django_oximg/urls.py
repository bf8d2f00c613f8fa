"""Mount anywhere: ``path("img/", include("django_oximg.urls"))``."""

from __future__ import annotations

from django.urls import re_path

from django_oximg import views

app_name = "oximg"

urlpatterns = [
    re_path(r"^(?P<path>.+)$", views.serve, name="serve"),
]
