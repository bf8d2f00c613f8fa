"""URLs: the gallery page, and django_oximg's thumbnail view under /img/."""

from __future__ import annotations

from django.urls import include, path
from gallery import views

urlpatterns = [
    path("", views.index, name="gallery"),
    path("img/", include("django_oximg.urls")),
]
